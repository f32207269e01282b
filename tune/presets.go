package tune

import (
	"fmt"
	"sort"
	"strings"

	"github.com/mneme-gpu/mneme/spec"
)

// Limits are the device properties the built-in spaces are derived from and
// that derived configurations must respect. Zero fields take the defaults of
// current NVIDIA GPUs (see WithDefaults).
type Limits struct {
	MaxThreadsPerBlock   int `json:"max_threads_per_block"`
	MaxSharedMemPerBlock int `json:"max_shared_mem_per_block"`
	SMCount              int `json:"sm_count"`
	RegsPerSM            int `json:"regs_per_sm"`
	WarpSize             int `json:"warp_size"`
}

// WithDefaults fills unset limits: 1024 threads per block, 48 KiB of shared
// memory (the opt-in maximum is larger, but needs an attribute we do not set),
// 65536 registers per SM, warps of 32. SMCount stays 0 when unknown.
func (l Limits) WithDefaults() Limits {
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
func (l Limits) Check(c spec.Config) error {
	l = l.WithDefaults()
	if n := c.Block.Count(); n > uint64(l.MaxThreadsPerBlock) {
		return fmt.Errorf("block %s: %d threads exceed the device's %d per block", c.Block, n, l.MaxThreadsPerBlock)
	}
	if c.Block.IsZero() == false && (c.Block.X == 0 || c.Block.Y == 0 || c.Block.Z == 0) {
		return fmt.Errorf("block %s: every dimension must be at least 1", c.Block)
	}
	if c.Grid.IsZero() == false && (c.Grid.X == 0 || c.Grid.Y == 0 || c.Grid.Z == 0) {
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

// Launch is what the built-in spaces need to know of the recorded launch.
type Launch struct {
	Kernel    string
	Grid      spec.Dim3
	Block     spec.Dim3
	SharedMem uint32
	// NumArgs is the kernel's argument count; ScalarArgs the 0-based indices
	// of its scalar (specializable) arguments.
	NumArgs    int
	ScalarArgs []int
}

// Threads is the total number of threads the recorded launch ran.
func (l Launch) Threads() uint64 { return l.Grid.Count() * l.Block.Count() }

// OneDimensional reports whether both grid and block are 1D.
func (l Launch) OneDimensional() bool {
	return l.Grid.Y <= 1 && l.Grid.Z <= 1 && l.Block.Y <= 1 && l.Block.Z <= 1
}

// Vars are the recorded values and device limits available to YAML
// expressions (see SPACES.md).
func (l Launch) Vars(lim Limits) map[string]any {
	lim = lim.WithDefaults()
	g, b := normDim(l.Grid), normDim(l.Block)
	return map[string]any{
		"N":               int(l.Threads()),
		"Nx":              int(g.X) * int(b.X),
		"Ny":              int(g.Y) * int(b.Y),
		"Nz":              int(g.Z) * int(b.Z),
		"rec_grid_x":      int(g.X),
		"rec_grid_y":      int(g.Y),
		"rec_grid_z":      int(g.Z),
		"rec_block_x":     int(b.X),
		"rec_block_y":     int(b.Y),
		"rec_block_z":     int(b.Z),
		"rec_shared_mem":  int(l.SharedMem),
		"num_args":        l.NumArgs,
		"num_scalar_args": len(l.ScalarArgs),
		"max_threads":     lim.MaxThreadsPerBlock,
		"max_shared_mem":  lim.MaxSharedMemPerBlock,
		"sm_count":        lim.SMCount,
		"regs_per_sm":     lim.RegsPerSM,
		"warp_size":       lim.WarpSize,
	}
}

func normDim(d spec.Dim3) spec.Dim3 {
	if d.X == 0 {
		d.X = 1
	}
	if d.Y == 0 {
		d.Y = 1
	}
	if d.Z == 0 {
		d.Z = 1
	}
	return d
}

// Pipelines are the optimization pipelines the built-in spaces choose from.
var Pipelines = []string{"default<O1>", "default<O2>", "default<O3>", "default<Os>", "default<Oz>"}

// PresetNames lists the built-in spaces.
var PresetNames = []string{"quick", "standard", "launch", "compiler", "full"}

// Well-known parameter names the built-in derivation reads.
const (
	ParamBlockX         = "block_x"
	ParamBlockY         = "block_y"
	ParamPasses         = "passes"
	ParamCodegenOpt     = "codegen_opt"
	ParamSpecialize     = "specialize"
	ParamSpecializeDims = "specialize_dims"
	ParamLaunchBounds   = "launch_bounds"
	ParamMinBlocks      = "min_blocks_per_sm"
	ParamMaxRegisters   = "max_registers"
	ParamPtxasOpt       = "ptxas_opt"
)

// Preset builds the built-in space called name for a recorded launch on a
// device with the given limits.
func Preset(name string, l Launch, lim Limits) (*Space, error) {
	lim = lim.WithDefaults()
	if l.Block.Count() == 0 || l.Grid.Count() == 0 {
		return nil, fmt.Errorf("preset %s: the recorded launch has no geometry (grid %s, block %s)", name, l.Grid, l.Block)
	}
	l.Grid, l.Block = normDim(l.Grid), normDim(l.Block)
	s := &Space{
		Name:     name,
		Baseline: spec.Baseline(l.Grid, l.Block, l.SharedMem),
		Vars:     l.Vars(lim),
		Limits:   lim,
	}
	specializable := len(l.ScalarArgs) > 0
	switch name {
	case "quick":
		s.addBlock(l, lim, "pow2")
		s.Params = append(s.Params, Pipeline(ParamPasses, "default<O2>", "default<O3>"))
		if specializable {
			s.Params = append(s.Params, Bool(ParamSpecialize))
		}
	case "standard":
		s.addBlock(l, lim, "step64")
		s.Params = append(s.Params, Pipeline(ParamPasses, Pipelines...))
		if specializable {
			s.Params = append(s.Params, Bool(ParamSpecialize))
		}
		s.Params = append(s.Params, Bool(ParamSpecializeDims))
	case "launch":
		s.addBlock(l, lim, "warp")
		s.addLaunchBounds(lim)
	case "compiler":
		s.Params = append(s.Params,
			Pipeline(ParamPasses, Pipelines...),
			IntRange(ParamCodegenOpt, 0, 3, 1))
		if specializable {
			s.Params = append(s.Params, Bool(ParamSpecialize))
		}
		s.Params = append(s.Params,
			Bool(ParamSpecializeDims),
			Categorical(ParamMaxRegisters, 0, 32, 64, 128, 255),
			Categorical(ParamPtxasOpt, 0, 1, 2, 3))
	case "full":
		s.addBlock(l, lim, "warp")
		s.Params = append(s.Params,
			Pipeline(ParamPasses, Pipelines...),
			IntRange(ParamCodegenOpt, 0, 3, 1))
		if specializable {
			s.Params = append(s.Params, Bool(ParamSpecialize))
		}
		s.Params = append(s.Params, Bool(ParamSpecializeDims))
		s.addLaunchBounds(lim)
		s.Params = append(s.Params,
			Categorical(ParamMaxRegisters, 0, 32, 64, 128, 255),
			Categorical(ParamPtxasOpt, 0, 1, 2, 3))
	default:
		return nil, fmt.Errorf("unknown preset %q (want %s)", name, strings.Join(PresetNames, ", "))
	}
	base := s.Baseline
	s.Derive = func(pt Point) (spec.Config, error) { return deriveBuiltin(pt, l, base) }
	return s, s.Validate()
}

// addBlock adds the block-shape parameters. For a 1D launch: blockDim.x over
// powers of two ("pow2"), multiples of 64 ("step64") or of the warp size
// ("warp"), up to the device limit. For 2D/3D launches: powers of two in x
// and y (z as recorded) whose product is a multiple of the warp size and
// within the limit.
func (s *Space) addBlock(l Launch, lim Limits, grain string) {
	maxT := lim.MaxThreadsPerBlock
	if maxT > 1024 {
		maxT = 1024
	}
	warp := lim.WarpSize
	if l.OneDimensional() {
		switch grain {
		case "pow2":
			vals := map[int]bool{int(l.Block.X): int(l.Block.X) <= maxT}
			for b := warp; b <= maxT; b *= 2 {
				vals[b] = true
			}
			var c []any
			for _, v := range sortedTrue(vals) {
				c = append(c, v)
			}
			s.Params = append(s.Params, Categorical(ParamBlockX, c...))
		case "step64":
			step := 2 * warp
			s.Params = append(s.Params, IntRange(ParamBlockX, step, maxT/step*step, step))
		default:
			s.Params = append(s.Params, IntRange(ParamBlockX, warp, maxT/warp*warp, warp))
		}
		return
	}
	var pow2 []any
	for b := 1; b <= maxT; b *= 2 {
		pow2 = append(pow2, b)
	}
	s.Params = append(s.Params, Categorical(ParamBlockX, pow2...), Categorical(ParamBlockY, pow2...))
	bz := int(l.Block.Z)
	s.Constraints = append(s.Constraints, Constraint{
		Name: fmt.Sprintf("block_x*block_y*%d <= %d and a multiple of %d", bz, maxT, warp),
		Check: func(pt Point) (bool, error) {
			n := pt[ParamBlockX].(int) * pt[ParamBlockY].(int) * bz
			return n <= maxT && n%warp == 0, nil
		},
	})
}

// addLaunchBounds adds launch bounds (max threads = the block size) with a
// minimum of resident blocks per SM. Asking for more blocks than leave 32
// registers per thread is pointless, so that is excluded; without launch
// bounds only min_blocks_per_sm 0 is kept, so no configuration repeats.
func (s *Space) addLaunchBounds(lim Limits) {
	s.Params = append(s.Params, Bool(ParamLaunchBounds), Categorical(ParamMinBlocks, 0, 1, 2, 4, 8))
	resident := lim.RegsPerSM / 32
	s.Constraints = append(s.Constraints, Constraint{
		Name: fmt.Sprintf("min_blocks_per_sm is 0 without launch bounds, and min_blocks_per_sm * threads <= %d", resident),
		Check: func(pt Point) (bool, error) {
			mb := pt[ParamMinBlocks].(int)
			if !pt[ParamLaunchBounds].(bool) {
				return mb == 0, nil
			}
			return mb*blockThreads(pt, s.Baseline) <= resident, nil
		},
	})
}

func blockThreads(pt Point, base spec.Config) int {
	bx, by := int(base.Block.X), int(base.Block.Y)
	if v, ok := pt[ParamBlockX].(int); ok {
		bx = v
	}
	if v, ok := pt[ParamBlockY].(int); ok {
		by = v
	}
	return bx * by * int(base.Block.Z)
}

// deriveBuiltin maps the well-known parameter names onto the baseline; the
// grid is recomputed so the total work stays covered.
func deriveBuiltin(pt Point, l Launch, base spec.Config) (spec.Config, error) {
	c := base
	if v, ok := pt[ParamBlockX].(int); ok {
		c.Block.X = uint32(v)
		c.Grid.X = uint32(ceilDiv(uint64(l.Grid.X)*uint64(l.Block.X), uint64(v)))
	}
	if v, ok := pt[ParamBlockY].(int); ok {
		c.Block.Y = uint32(v)
		c.Grid.Y = uint32(ceilDiv(uint64(l.Grid.Y)*uint64(l.Block.Y), uint64(v)))
	}
	if v, ok := pt[ParamPasses].(string); ok {
		c.Passes = v
	}
	if v, ok := pt[ParamCodegenOpt].(int); ok {
		c.CodegenOpt = v
	}
	if v, ok := pt[ParamSpecialize].(bool); ok {
		c.Specialize = v
	}
	if v, ok := pt[ParamSpecializeDims].(bool); ok {
		c.SpecializeDims = v
	}
	if v, ok := pt[ParamLaunchBounds].(bool); ok && v {
		c.SetLaunchBounds = true
		c.MaxThreads = int(c.Block.Count())
		if mb, ok := pt[ParamMinBlocks].(int); ok {
			c.MinBlocksPerSM = mb
		}
	}
	if v, ok := pt[ParamMaxRegisters].(int); ok {
		c.MaxRegisters = v
	}
	if v, ok := pt[ParamPtxasOpt].(int); ok {
		c.PtxasOpt = v
	}
	return c, nil
}

func ceilDiv(a, b uint64) uint64 { return (a + b - 1) / b }

func sortedTrue(m map[int]bool) []int {
	var out []int
	for k, v := range m {
		if v {
			out = append(out, k)
		}
	}
	sort.Ints(out)
	return out
}
