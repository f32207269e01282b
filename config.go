// Package mneme holds the vocabulary every stage shares: launch geometry, the
// configuration under which one recorded kernel is recompiled and replayed
// (with the table of its fields), the result and status of a replay, the
// kinds of recorded arguments, verification options and device limits.
// It is plain data (no cgo) so the database, the tuner and the Python protocol
// can use it on machines without LLVM or a GPU.
package mneme

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Dim3 is a CUDA grid or block shape.
type Dim3 struct {
	X uint32 `json:"x" yaml:"x"`
	Y uint32 `json:"y" yaml:"y"`
	Z uint32 `json:"z" yaml:"z"`
}

// UnmarshalJSON reads a shape: all components zero (or none given) is an
// unset shape; otherwise a component left out is 1 ({"x":128} is 128,1,1),
// and one given as 0 stays 0, for the checks to refuse (CUDA launches no
// such shape; read as 1 it would be run as a shape nobody asked for).
func (d *Dim3) UnmarshalJSON(b []byte) error {
	var p struct {
		X, Y, Z *uint32
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*d = Dim3{}
	unset := true
	for _, v := range []*uint32{p.X, p.Y, p.Z} {
		if v != nil && *v != 0 {
			unset = false
		}
	}
	if unset {
		return nil
	}
	for _, c := range []struct{ v, dst *uint32 }{{p.X, &d.X}, {p.Y, &d.Y}, {p.Z, &d.Z}} {
		*c.dst = 1
		if c.v != nil {
			*c.dst = *c.v
		}
	}
	return nil
}

// checkShape refuses a set shape with a zero component.
func checkShape(key string, d Dim3) error {
	if !d.IsZero() && (d.X == 0 || d.Y == 0 || d.Z == 0) {
		return fmt.Errorf("%s %s: every dimension must be at least 1 (or all 0: the recorded shape)", key, d)
	}
	return nil
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

// CompilerRevision changes whenever package jit compiles the same inputs to
// other code (2: float arguments folded after optimization, with their
// multiply-adds fused as the application's code fuses them). Whatever keeps
// compiled code or results found with it keys on it (jit's compile cache,
// the deployment cache, mneme optimize's tuning results), so none serves
// what an older compiler made.
const CompilerRevision = "2"

// Config is the replay configuration: how one recorded kernel is recompiled
// and launched (field names in JSON and YAML as in Mneme), plus the ptxas
// knobs and the target. The zero value of an optional field means "as
// recorded" or "the default". Every field has one entry in the table of
// configFields below, which search spaces, presets and flags read; the keys
// are spelled only in this file.
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

	// Original runs the device code the application itself registered (its
	// fat binary, as recorded) instead of compiling the IR: the true
	// baseline. Only the launch geometry applies to it.
	Original bool `json:"original,omitempty" yaml:"original,omitempty"`

	// FPContract is how code generation may fuse multiply and add into fma:
	// "fast", "on" or "off" as clang's -ffp-contract; empty means as the
	// application was compiled, which the IR tells.
	FPContract string `json:"fp_contract,omitempty" yaml:"fp_contract,omitempty"`

	// Arch is the target, e.g. "sm_90"; empty means the device's (or sm_90 without one).
	Arch string `json:"arch,omitempty" yaml:"arch,omitempty"`
	// PTXVersion is the PTX ISA version times ten (80 for 8.0); 0 picks one for Arch.
	PTXVersion int `json:"ptx_version,omitempty" yaml:"ptx_version,omitempty"`
}

// The keys of the configuration's fields in JSON, YAML, search spaces and
// flags. Each must equal its field's struct tag (a test checks).
const (
	KeyGrid            = "grid"
	KeyBlock           = "block"
	KeySharedMem       = "shared_mem"
	KeySpecialize      = "specialize"
	KeySpecializeArgs  = "specialize_args"
	KeySpecializeDims  = "specialize_dims"
	KeySetLaunchBounds = "set_launch_bounds"
	KeyMaxThreads      = "max_threads"
	KeyMinBlocksPerSM  = "min_blocks_per_sm"
	KeyPasses          = "passes"
	KeyCodegenOpt      = "codegen_opt"
	KeyPrune           = "prune"
	KeyInternalize     = "internalize"
	KeyPtxasOpt        = "ptxas_opt"
	KeyMaxRegisters    = "max_registers"
	KeyOriginal        = "original"
	KeyFPContract      = "fp_contract"
	KeyArch            = "arch"
	KeyPTXVersion      = "ptx_version"
)

// configFields is the table of the configuration's fields, in struct order.
// Adding a knob means adding its struct field, its key and one entry here.
var configFields = []ConfigField{
	{Key: KeyGrid, Kind: ValueDim3, Tunable: true, Doc: "grid dimensions",
		field: func(c *Config) any { return &c.Grid },
		check: func(c Config) error { return checkShape(KeyGrid, c.Grid) }},
	{Key: KeyBlock, Kind: ValueDim3, Tunable: true, Doc: "block dimensions",
		field: func(c *Config) any { return &c.Block },
		check: func(c Config) error {
			if err := checkShape(KeyBlock, c.Block); err != nil {
				return err
			}
			if c.Block.Count() > 1024 {
				return fmt.Errorf("block %s: %d threads exceed the CUDA limit of 1024", c.Block, c.Block.Count())
			}
			return nil
		}},
	{Key: KeySharedMem, Kind: ValueUint, Tunable: true, Doc: "dynamic shared memory in bytes",
		field: func(c *Config) any { return &c.SharedMem }},
	{Key: KeySpecialize, Kind: ValueBool, Tunable: true, Doc: "fold every scalar argument into the code",
		field: func(c *Config) any { return &c.Specialize }},
	{Key: KeySpecializeArgs, Kind: ValueInts, Tunable: true, Doc: "0-based indices of the arguments to fold (empty: all scalars)",
		field: func(c *Config) any { return &c.SpecializeArgs },
		check: func(c Config) error {
			for _, i := range c.SpecializeArgs {
				if i < 0 {
					return fmt.Errorf("specialize_args: index %d is negative", i)
				}
			}
			return nil
		}},
	{Key: KeySpecializeDims, Kind: ValueBool, Tunable: true, Doc: "fold block and grid dimensions into the code",
		field: func(c *Config) any { return &c.SpecializeDims }},
	{Key: KeySetLaunchBounds, Kind: ValueBool, Tunable: true, Doc: "give the kernel launch bounds",
		field: func(c *Config) any { return &c.SetLaunchBounds }},
	{Key: KeyMaxThreads, Kind: ValueInt, Tunable: true, Doc: "launch bounds: max threads per block",
		field: func(c *Config) any { return &c.MaxThreads },
		check: func(c Config) error {
			if c.SetLaunchBounds && c.MaxThreads <= 0 {
				return fmt.Errorf("max_threads %d: launch bounds need a positive thread count", c.MaxThreads)
			}
			return nil
		}},
	{Key: KeyMinBlocksPerSM, Kind: ValueInt, Tunable: true, Doc: "launch bounds: min resident blocks per SM",
		Bounds: &IntBounds{Min: 0, Max: math.MaxInt32, Rule: "must not be negative"},
		field:  func(c *Config) any { return &c.MinBlocksPerSM }},
	{Key: KeyPasses, Kind: ValueString, Tunable: true, Doc: "new-pass-manager pipeline text", Want: "a pipeline text",
		field: func(c *Config) any { return &c.Passes }},
	{Key: KeyCodegenOpt, Kind: ValueInt, Tunable: true, Doc: "NVPTX code generation level",
		Bounds: &IntBounds{Min: 0, Max: 3},
		field:  func(c *Config) any { return &c.CodegenOpt }},
	{Key: KeyPrune, Kind: ValueBool, Tunable: true, Doc: "compile only the kernel's closure",
		field: func(c *Config) any { return &c.Prune }},
	{Key: KeyInternalize, Kind: ValueBool, Tunable: true, Doc: "give non-kernel symbols internal linkage",
		field: func(c *Config) any { return &c.Internalize }},
	{Key: KeyPtxasOpt, Kind: ValueInt, Tunable: true, Doc: "ptxas optimization level (0: driver default)",
		Bounds: &IntBounds{Min: 0, Max: 4, Rule: "must be 1..4 (0 = driver default)"},
		field:  func(c *Config) any { return &c.PtxasOpt }},
	{Key: KeyMaxRegisters, Kind: ValueInt, Tunable: true, Doc: "ptxas register cap per thread (0: none)",
		Bounds: &IntBounds{Min: 0, Max: 255},
		field:  func(c *Config) any { return &c.MaxRegisters }},
	// The application's own code is the baseline, not a point to search.
	{Key: KeyOriginal, Kind: ValueBool, Doc: "run the application's own device code instead of compiling the IR",
		field: func(c *Config) any { return &c.Original },
		check: func(c Config) error {
			if c.Original {
				return c.checkOriginal()
			}
			return nil
		}},
	{Key: KeyFPContract, Kind: ValueString, Tunable: true, Doc: "multiply-add fusion: fast, on or off (empty: as the application was compiled)",
		Want:  "fast, on or off",
		field: func(c *Config) any { return &c.FPContract },
		check: func(c Config) error {
			switch c.FPContract {
			case "", "fast", "on", "off":
				return nil
			}
			return fmt.Errorf("fp_contract %q: must be fast, on or off", c.FPContract)
		}},
	// The target is chosen for the device, not searched.
	{Key: KeyArch, Kind: ValueString, Doc: "target architecture, e.g. sm_90", Want: "a target such as sm_90",
		field: func(c *Config) any { return &c.Arch }},
	{Key: KeyPTXVersion, Kind: ValueInt, Doc: "PTX ISA version times ten (0: one for the target)",
		field: func(c *Config) any { return &c.PTXVersion }},
}

// Baseline is the configuration that reproduces the recorded launch: the
// recorded geometry, the default pipeline, nothing specialized, and nothing
// internalized: the application's compiler optimized the unit with its
// device functions external, and internalizing first changes what the
// optimizer does (measured: a double-precision n-body kernel got another
// loop structure and ran 9% slower).
func Baseline(grid, block Dim3, sharedMem uint32) Config {
	return Config{Grid: grid, Block: block, SharedMem: sharedMem, Passes: DefaultPipeline, CodegenOpt: 3, Prune: true}
}

// Validate checks what can be checked without a device: each field's bounds
// and rules from the table, in table order.
func (c Config) Validate() error {
	for _, f := range configFields {
		if err := f.validate(c); err != nil {
			return err
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

// checkOriginal refuses compile knobs on a configuration that runs the
// application's own code, where they would be silently ignored.
func (c Config) checkOriginal() error {
	switch {
	case c.Specialize || len(c.SpecializeArgs) > 0:
		return fmt.Errorf("original: specialize needs recompiling the IR; the application's own code cannot be specialized")
	case c.SpecializeDims:
		return fmt.Errorf("original: specialize_dims needs recompiling the IR")
	case c.SetLaunchBounds:
		return fmt.Errorf("original: set_launch_bounds needs recompiling the IR")
	case c.PtxasOpt != 0 || c.MaxRegisters != 0:
		return fmt.Errorf("original: ptxas_opt and max_registers need recompiling the IR")
	case c.FPContract != "":
		return fmt.Errorf("original: fp_contract needs recompiling the IR")
	}
	return nil
}
