package mneme

import "fmt"

// DeviceLimits are the GPU properties that search spaces are derived from
// and that derived configurations must respect; a worker's answer to "open"
// carries them (tune/PROTOCOL.md). Zero limits take the defaults of current
// NVIDIA GPUs (see WithDefaults).
type DeviceLimits struct {
	Name                 string `json:"name,omitempty"`
	Arch                 string `json:"arch,omitempty"`
	SMCount              int    `json:"sm_count"`
	MaxThreadsPerBlock   int    `json:"max_threads_per_block"`
	MaxSharedMemPerBlock int    `json:"max_shared_mem_per_block"`
	RegsPerSM            int    `json:"regs_per_sm"`
	WarpSize             int    `json:"warp_size"`
}

// WithDefaults fills unset limits: 1024 threads per block, 48 KiB of shared
// memory (the opt-in maximum is larger, but needs an attribute we do not set),
// 65536 registers per SM, warps of 32. SMCount stays 0 when unknown.
func (l DeviceLimits) WithDefaults() DeviceLimits {
	if l.MaxThreadsPerBlock <= 0 {
		l.MaxThreadsPerBlock = 1024
	}
	if l.MaxSharedMemPerBlock <= 0 {
		l.MaxSharedMemPerBlock = 48 << 10
	}
	if l.RegsPerSM <= 0 {
		l.RegsPerSM = 65536
	}
	if l.WarpSize <= 0 {
		l.WarpSize = 32
	}
	return l
}

// Limits of CUDA's grid dimensions.
const (
	maxGridX  = 1<<31 - 1
	maxGridYZ = 65535
)

// Check rejects a configuration the device cannot launch.
func (l DeviceLimits) Check(c Config) error {
	l = l.WithDefaults()
	if n := c.Block.Count(); n > uint64(l.MaxThreadsPerBlock) {
		return fmt.Errorf("block %s: %d threads exceed the device's %d per block", c.Block, n, l.MaxThreadsPerBlock)
	}
	if !c.Block.IsZero() && (c.Block.X == 0 || c.Block.Y == 0 || c.Block.Z == 0) {
		return fmt.Errorf("block %s: every dimension must be at least 1", c.Block)
	}
	if !c.Grid.IsZero() && (c.Grid.X == 0 || c.Grid.Y == 0 || c.Grid.Z == 0) {
		return fmt.Errorf("grid %s: every dimension must be at least 1", c.Grid)
	}
	if c.Grid.X > maxGridX || c.Grid.Y > maxGridYZ || c.Grid.Z > maxGridYZ {
		return fmt.Errorf("grid %s: exceeds CUDA's grid limits", c.Grid)
	}
	if int(c.SharedMem) > l.MaxSharedMemPerBlock {
		return fmt.Errorf("shared_mem %d: exceeds the device's %d bytes per block", c.SharedMem, l.MaxSharedMemPerBlock)
	}
	if c.SetLaunchBounds && c.MaxThreads > l.MaxThreadsPerBlock {
		return fmt.Errorf("max_threads %d: exceeds the device's %d per block", c.MaxThreads, l.MaxThreadsPerBlock)
	}
	return nil
}
