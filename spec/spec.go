// Package spec holds the vocabulary every stage shares: launch geometry and the
// configuration under which one recorded kernel is recompiled and replayed.
// It is plain data (no cgo) so the database, the tuner and the Python protocol
// can use it on machines without LLVM or a GPU.
package spec

import (
	"fmt"
	"strconv"
	"strings"
)

// Dim3 is a CUDA grid or block shape.
type Dim3 struct {
	X uint32 `json:"x" yaml:"x"`
	Y uint32 `json:"y" yaml:"y"`
	Z uint32 `json:"z" yaml:"z"`
}

// Count is the number of threads (or blocks) the shape describes.
func (d Dim3) Count() uint64 { return uint64(d.X) * uint64(d.Y) * uint64(d.Z) }

// IsZero reports whether the shape was left unset.
func (d Dim3) IsZero() bool { return d.X == 0 && d.Y == 0 && d.Z == 0 }

func (d Dim3) String() string { return fmt.Sprintf("%d,%d,%d", d.X, d.Y, d.Z) }

// ParseDim3 reads "X", "X,Y" or "X,Y,Z"; missing components are 1.
func ParseDim3(s string) (Dim3, error) {
	parts := strings.Split(strings.TrimSpace(s), ",")
	if len(parts) == 0 || len(parts) > 3 || parts[0] == "" {
		return Dim3{}, fmt.Errorf("dimension %q: want X[,Y[,Z]]", s)
	}
	v := [3]uint32{1, 1, 1}
	for i, p := range parts {
		n, err := strconv.ParseUint(strings.TrimSpace(p), 10, 32)
		if err != nil || n == 0 {
			return Dim3{}, fmt.Errorf("dimension %q: component %d must be a positive integer", s, i+1)
		}
		v[i] = uint32(n)
	}
	return Dim3{v[0], v[1], v[2]}, nil
}

// DefaultPipeline is the optimization pipeline used when a configuration names none.
const DefaultPipeline = "default<O3>"

// Config is the replay configuration of DESIGN.md (Mneme's field names in
// JSON) plus the ptxas knobs and the target. The zero value of an optional
// field means "as recorded" or "the default".
type Config struct {
	Grid      Dim3   `json:"grid" yaml:"grid"`
	Block     Dim3   `json:"block" yaml:"block"`
	SharedMem uint32 `json:"shared_mem" yaml:"shared_mem"`

	// Specialize folds every scalar argument into the code as a constant.
	Specialize bool `json:"specialize" yaml:"specialize"`
	// SpecializeArgs, when non-empty, limits specialization to these 0-based argument indices.
	SpecializeArgs []int `json:"specialize_args,omitempty" yaml:"specialize_args,omitempty"`
	// SpecializeDims folds block and grid dimensions into the code.
	SpecializeDims bool `json:"specialize_dims" yaml:"specialize_dims"`

	SetLaunchBounds bool `json:"set_launch_bounds" yaml:"set_launch_bounds"`
	MaxThreads      int  `json:"max_threads" yaml:"max_threads"`
	MinBlocksPerSM  int  `json:"min_blocks_per_sm" yaml:"min_blocks_per_sm"`

	Passes     string `json:"passes" yaml:"passes"`
	CodegenOpt int    `json:"codegen_opt" yaml:"codegen_opt"`
	Prune      bool   `json:"prune" yaml:"prune"`
	// Internalize gives every symbol but the kernel internal linkage, so the
	// optimizer may inline, specialize and drop it.
	Internalize bool `json:"internalize" yaml:"internalize"`

	// PtxasOpt asks ptxas (the driver JIT) for optimization level 1..4; 0
	// (unset) means the driver's default, which is 4. Level 0 is not offered:
	// it only makes code slower and would be indistinguishable from "unset".
	PtxasOpt int `json:"ptxas_opt,omitempty" yaml:"ptxas_opt,omitempty"`
	// MaxRegisters caps registers per thread in ptxas; 0 means no cap.
	MaxRegisters int `json:"max_registers,omitempty" yaml:"max_registers,omitempty"`

	// Arch is the target, e.g. "sm_90"; empty means the device's (or sm_90 without one).
	Arch string `json:"arch,omitempty" yaml:"arch,omitempty"`
	// PTXVersion is the PTX ISA version times ten (80 for 8.0); 0 picks one for Arch.
	PTXVersion int `json:"ptx_version,omitempty" yaml:"ptx_version,omitempty"`
}

// Baseline is the configuration that reproduces the recorded launch: the
// recorded geometry, the default pipeline, nothing specialized.
func Baseline(grid, block Dim3, sharedMem uint32) Config {
	return Config{Grid: grid, Block: block, SharedMem: sharedMem, Passes: DefaultPipeline, CodegenOpt: 3, Prune: true, Internalize: true}
}

// Validate checks what can be checked without a device.
func (c Config) Validate() error {
	if c.CodegenOpt < 0 || c.CodegenOpt > 3 {
		return fmt.Errorf("codegen_opt %d: must be 0..3", c.CodegenOpt)
	}
	if c.PtxasOpt < 0 || c.PtxasOpt > 4 {
		return fmt.Errorf("ptxas_opt %d: must be 1..4 (0 = driver default)", c.PtxasOpt)
	}
	if c.MaxRegisters < 0 || c.MaxRegisters > 255 {
		return fmt.Errorf("max_registers %d: must be 0..255", c.MaxRegisters)
	}
	if c.Block.Count() > 1024 {
		return fmt.Errorf("block %s: %d threads exceed the CUDA limit of 1024", c.Block, c.Block.Count())
	}
	if c.SetLaunchBounds && c.MaxThreads <= 0 {
		return fmt.Errorf("max_threads %d: launch bounds need a positive thread count", c.MaxThreads)
	}
	if c.MinBlocksPerSM < 0 {
		return fmt.Errorf("min_blocks_per_sm %d: must not be negative", c.MinBlocksPerSM)
	}
	for _, i := range c.SpecializeArgs {
		if i < 0 {
			return fmt.Errorf("specialize_args: index %d is negative", i)
		}
	}
	return nil
}

// Specializes reports whether argument i is folded into the code.
func (c Config) Specializes(i int) bool {
	if !c.Specialize {
		return false
	}
	if len(c.SpecializeArgs) == 0 {
		return true
	}
	for _, j := range c.SpecializeArgs {
		if j == i {
			return true
		}
	}
	return false
}
