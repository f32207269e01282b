package tune

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/internal/safefile"
	"github.com/mneme-gpu/mneme/nvbin"
)

// Launch is what the built-in spaces need to know of the recorded launch.
type Launch struct {
	Kernel    string
	Grid      mneme.Dim3
	Block     mneme.Dim3
	SharedMem uint32
	// NumArgs is the kernel's argument count; ScalarArgs the 0-based indices
	// of its scalar (specializable) arguments.
	NumArgs    int
	ScalarArgs []int
	// MachineCode: the kernel was recorded as machine code only (no IR),
	// so only its launch geometry can change, and the assembler knobs when
	// its image embeds PTX (EmbeddedPTX).
	MachineCode bool
	EmbeddedPTX bool
}

// Threads is the total number of threads the recorded launch ran.
func (l Launch) Threads() uint64 { return l.Grid.Count() * l.Block.Count() }

// OneDimensional reports whether both grid and block are 1D.
func (l Launch) OneDimensional() bool {
	return l.Grid.Y <= 1 && l.Grid.Z <= 1 && l.Block.Y <= 1 && l.Block.Z <= 1
}

// Vars are the recorded values and device limits available to YAML
// expressions (see SPACES.md).
func (l Launch) Vars(lim mneme.DeviceLimits) map[string]any {
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
		// The device's bound on a derived max_threads goes by that field's
		// name (SPACES.md).
		mneme.KeyMaxThreads: lim.MaxThreadsPerBlock,
		"max_shared_mem":    lim.MaxSharedMemPerBlock,
		"sm_count":          lim.SMCount,
		"regs_per_sm":       lim.RegsPerSM,
		"warp_size":         lim.WarpSize,
	}
}

func normDim(d mneme.Dim3) mneme.Dim3 {
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

// Well-known parameter names the built-in derivation reads. Those named
// after a configuration field set it directly (see directParams).
const (
	ParamBlockX         = "block_x"
	ParamBlockY         = "block_y"
	ParamPasses         = mneme.KeyPasses
	ParamCodegenOpt     = mneme.KeyCodegenOpt
	ParamSpecialize     = mneme.KeySpecialize
	ParamSpecializeDims = mneme.KeySpecializeDims
	ParamLaunchBounds   = "launch_bounds"
	ParamMinBlocks      = mneme.KeyMinBlocksPerSM
	ParamMaxRegisters   = mneme.KeyMaxRegisters
	ParamPtxasOpt       = mneme.KeyPtxasOpt
)

// directParams are the built-in parameters whose value is the configuration
// field of the same name, set through mneme's table. Block shape and launch
// bounds are derived from several parameters instead.
var directParams = []string{ParamPasses, ParamCodegenOpt, ParamSpecialize, ParamSpecializeDims, ParamMaxRegisters, ParamPtxasOpt}

// Preset builds the built-in space called name for a recorded launch on a
// device with the given limits.
func Preset(name string, l Launch, lim mneme.DeviceLimits) (*Space, error) {
	return presetSpace(name, SpaceShape{}, l, lim, true)
}

// ShapedPreset builds the built-in space called name reshaped by Mneme's
// space options (see SpaceShape).
func ShapedPreset(name string, sh SpaceShape, l Launch, lim mneme.DeviceLimits) (*Space, error) {
	return presetSpace(name, sh, l, lim, true)
}

// presetSpace builds a preset reshaped by sh; without searchLaunch it leaves
// out the block shape parameters, so every configuration keeps the recorded
// launch.
func presetSpace(name string, sh SpaceShape, l Launch, lim mneme.DeviceLimits, searchLaunch bool) (*Space, error) {
	lim = lim.WithDefaults()
	if l.Block.Count() == 0 || l.Grid.Count() == 0 {
		return nil, fmt.Errorf("preset %s: the recorded launch has no geometry (grid %s, block %s)", name, l.Grid, l.Block)
	}
	l.Grid, l.Block = normDim(l.Grid), normDim(l.Block)
	s := &Space{
		Name:     name,
		Baseline: mneme.Baseline(l.Grid, l.Block, l.SharedMem),
		Vars:     l.Vars(lim),
		Limits:   lim,
	}
	if l.MachineCode {
		return machineCodePreset(s, name, l, lim)
	}
	specializable := len(l.ScalarArgs) > 0
	addBlock := func(grain string) {
		if searchLaunch {
			s.addBlock(l, lim, grain)
		}
	}
	switch name {
	case "quick":
		addBlock("pow2")
		s.Params = append(s.Params, Pipeline(ParamPasses, "default<O2>", "default<O3>"))
		if specializable {
			s.Params = append(s.Params, Bool(ParamSpecialize))
		}
	case "standard":
		addBlock("step64")
		s.Params = append(s.Params, Pipeline(ParamPasses, Pipelines...))
		if specializable {
			s.Params = append(s.Params, Bool(ParamSpecialize))
		}
		s.Params = append(s.Params, Bool(ParamSpecializeDims))
	case "launch":
		addBlock("warp")
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
		addBlock("warp")
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
	if err := s.applyShape(sh, l, lim); err != nil {
		return nil, err
	}
	base := s.Baseline
	s.Derive = func(pt Point) (mneme.Config, error) {
		c, err := deriveBuiltin(pt, l, base)
		if err == nil {
			shapeMaxThreads(&c, pt, sh, l, lim)
		}
		return c, err
	}
	return s, s.Validate()
}

// machineCodePreset is a preset for a kernel without IR: launch bounds,
// folding and pipelines need IR, so the presets keep their block shapes and,
// where the image embeds PTX, the assembler knobs (register cap, ptxas
// level) that reassemble it.
func machineCodePreset(s *Space, name string, l Launch, lim mneme.DeviceLimits) (*Space, error) {
	assembler := func() {
		s.Params = append(s.Params,
			Categorical(ParamMaxRegisters, 0, 32, 64, 128, 255),
			Categorical(ParamPtxasOpt, 0, 1, 2, 3))
	}
	switch name {
	case "quick":
		s.addBlock(l, lim, "pow2")
	case "standard":
		s.addBlock(l, lim, "step64")
	case "launch":
		s.addBlock(l, lim, "warp")
	case "full":
		s.addBlock(l, lim, "warp")
		if l.EmbeddedPTX {
			assembler()
		}
	case "compiler":
		if !l.EmbeddedPTX {
			return nil, fmt.Errorf("preset compiler: kernel %s was recorded as machine code only (through the driver) and its image embeds no PTX to assemble again; use --preset launch", l.Kernel)
		}
		assembler()
	default:
		return nil, fmt.Errorf("unknown preset %q (want %s)", name, strings.Join(PresetNames, ", "))
	}
	base := s.Baseline
	s.Derive = func(pt Point) (mneme.Config, error) { return deriveBuiltin(pt, l, base) }
	return s, s.Validate()
}

// addBlock adds the block-shape parameters. For a 1D launch: blockDim.x over
// powers of two ("pow2"), multiples of 64 ("step64") or of the warp size
// ("warp"), up to the device limit. For 2D/3D launches: powers of two in x
// and y (z as recorded) whose product is a multiple of the warp size and
// within the limit.
func (s *Space) addBlock(l Launch, lim mneme.DeviceLimits, grain string) {
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
func (s *Space) addLaunchBounds(lim mneme.DeviceLimits) {
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

func blockThreads(pt Point, base mneme.Config) int {
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
func deriveBuiltin(pt Point, l Launch, base mneme.Config) (mneme.Config, error) {
	c := base
	if v, ok := pt[ParamBlockX].(int); ok {
		c.Block.X = uint32(v)
		c.Grid.X = uint32(ceilDiv(uint64(l.Grid.X)*uint64(l.Block.X), uint64(v)))
	}
	if v, ok := pt[ParamBlockY].(int); ok {
		c.Block.Y = uint32(v)
		c.Grid.Y = uint32(ceilDiv(uint64(l.Grid.Y)*uint64(l.Block.Y), uint64(v)))
	}
	for _, name := range directParams {
		if v, ok := pt[name]; ok {
			if err := c.Set(name, v); err != nil {
				return mneme.Config{}, err
			}
		}
	}
	if v, ok := pt[ParamLaunchBounds].(bool); ok && v {
		c.SetLaunchBounds = true
		c.MaxThreads = int(c.Block.Count())
		if mb, ok := pt[ParamMinBlocks].(int); ok {
			c.MinBlocksPerSM = mb
		}
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

// machineCodeLaunchBound is kernel's launch bound in the module image at
// path (a fat binary or a cubin) for a GPU of arch (sm_90): the
// EIATTR_MAX_THREADS ptxas wrote into its cubin; 0 when there is none, or
// no cubin of the image names the kernel.
func machineCodeLaunchBound(path, arch, kernel string) int {
	image, err := safefile.ReadFile(path, safefile.MaxIR)
	if err != nil {
		return 0
	}
	var n int
	if _, err := fmt.Sscanf(arch, "sm_%d", &n); err != nil {
		return 0
	}
	for _, b := range nvbin.Cubins(image, n) {
		if c, err := nvbin.ParseCubin(b); err == nil {
			if k, ok := c.Kernel(kernel); ok && k.MaxThreads > 0 {
				return k.MaxThreads
			}
		}
	}
	return 0
}

// embedsPTX reports whether the module image at path (a kernel recorded as
// machine code) holds PTX a GPU of arch (sm_90) can assemble: PTX text, or
// a fat binary with PTX of that virtual architecture or an older one.
func embedsPTX(path, arch string) bool {
	image, err := safefile.ReadFile(path, safefile.MaxIR)
	if err != nil {
		return false
	}
	cs, err := nvbin.ParseFatbin(image)
	if errors.Is(err, nvbin.ErrNotFatbin) {
		// PTX text loaded as such, or a cubin (which embeds none).
		return !bytes.HasPrefix(image, []byte("\x7fELF")) && bytes.Contains(image[:min(len(image), 4096)], []byte(".version"))
	}
	if err != nil {
		return false
	}
	var n int
	if _, err := fmt.Sscanf(arch, "sm_%d", &n); err != nil {
		return false
	}
	_, ptx := nvbin.Select(cs, n)
	return len(ptx) > 0
}
