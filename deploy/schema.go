package deploy

import (
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/mneme-gpu/mneme"
)

// TunedKernel is one entry of mneme_tuned_kernels.json (a JSON object keyed
// by mangled kernel name): the whole tuned configuration, where it was tuned,
// and the recorded launch it started from. tune writes it; ReadMnemeTuned
// reads it.
type TunedKernel struct {
	Config         mneme.Config `json:"config"`
	Instance       string       `json:"instance"`
	StaticHash     string       `json:"static_hash,omitempty"`
	GPU            string       `json:"gpu,omitempty"`
	Speedup        float64      `json:"speedup"`
	TimeNS         float64      `json:"time_ns"`
	BaselineTimeNS float64      `json:"baseline_time_ns"`
	Metric         string       `json:"metric"`
	TunedAt        string       `json:"tuned_at"`
	// RecordedBlock and RecordedGrid are the recorded launch's geometry the
	// tuning started from: Config.Block is a tuned block only where it
	// differs from RecordedBlock.
	RecordedBlock mneme.Dim3 `json:"recorded_block"`
	RecordedGrid  mneme.Dim3 `json:"recorded_grid"`
	// LaunchSearched is true when block shapes were searched and the kernel
	// was judged geometry-agnostic, so a tuned block may be applied at run
	// time; false (a kernel that depends on its block shape, even if
	// aggressive launch safety searched it) keeps the application's block
	// whatever Config says.
	LaunchSearched bool `json:"launch_searched"`

	// Instances are the recorded instances the configuration was tuned on,
	// each with its own figures, when it was tuned across several (mneme
	// tune --kernel, or several -rid): TimeNS and BaselineTimeNS are then
	// totals over them, each instance's time times the launches it stands
	// for.
	Instances []TunedInstance `json:"instances,omitempty"`
	// Classes, when present, give one configuration per launch-shape class:
	// the kernel's shapes differ and so do their best configurations. A
	// launch takes the configuration of the class whose Block, Grid and
	// SharedMem it has; a launch of a shape no class names runs the
	// application's own code. Config above is then the best single
	// configuration over all classes, for readers that know no classes.
	Classes []TunedClass `json:"classes,omitempty"`
	// Statistics says what the folding of arguments rests on: "run" (the
	// database's launch statistics over the whole run) or "none" (a
	// database without them: no argument is folded). Empty in files written
	// before it existed.
	Statistics string `json:"statistics,omitempty"`
	// Folded lists the arguments Config folds and the values a variant
	// relies on: the runtime may fold only these, and only a launch whose
	// value is one of Values (when given) was measured.
	Folded []FoldedArg `json:"folded,omitempty"`
}

// TunedInstance is one recorded instance a configuration was tuned on.
type TunedInstance struct {
	Instance string     `json:"instance"` // SH/DH
	Grid     mneme.Dim3 `json:"grid"`
	Block    mneme.Dim3 `json:"block"`
	// SharedMem is the instance's dynamic shared memory in bytes.
	SharedMem uint32 `json:"shared_mem"`
	// Launches is how many launches of the run the instance stands for (its
	// weight in the objective).
	Launches       float64 `json:"launches"`
	TimeNS         float64 `json:"time_ns"`
	BaselineTimeNS float64 `json:"baseline_time_ns"`
}

// TunedClass is the configuration for the launches of one shape: those with
// exactly this grid, block and dynamic shared memory.
type TunedClass struct {
	Grid      mneme.Dim3 `json:"grid"`
	Block     mneme.Dim3 `json:"block"`
	SharedMem uint32     `json:"shared_mem"`
	// Config is the class's tuned configuration, its grid and block those
	// the class's launches take (a tuned block where LaunchSearched).
	Config         mneme.Config `json:"config"`
	Launches       float64      `json:"launches"`
	Speedup        float64      `json:"speedup"`
	TimeNS         float64      `json:"time_ns"`
	BaselineTimeNS float64      `json:"baseline_time_ns"`
	// Instances are the instances (SH/DH) of the class it was tuned on.
	Instances []string `json:"instances"`
}

// FoldedArg is one argument a tuned configuration folds into the code.
type FoldedArg struct {
	Arg  int    `json:"arg"` // 0-based
	Name string `json:"name,omitempty"`
	// Invariant is true when the argument held one value over the whole run.
	Invariant bool `json:"invariant"`
	// Distinct is the number of values the run gave it.
	Distinct int `json:"distinct"`
	// Values are the argument's bytes (hex, little-endian) in the recorded
	// instances the tuning measured: the variants it relies on.
	Values []string `json:"values,omitempty"`
}

// ProteusKernel is one entry of Proteus's PROTEUS_TUNED_KERNELS file, as
// tune writes it. ReadProteusTuned does not decode into it: Proteus reads
// each field leniently (a wrong type counts as absent), which a struct
// decode cannot express.
type ProteusKernel struct {
	Pipeline            string `json:"Pipeline"`
	CodeGen             string `json:"CodeGen"`
	SpecializeArgs      bool   `json:"SpecializeArgs"`
	LaunchBounds        bool   `json:"LaunchBounds"`
	SpecializeDims      bool   `json:"SpecializeDims"`
	SpecializeDimsRange bool   `json:"SpecializeDimsRange"`
	OptLevel            string `json:"OptLevel"`
	CodeGenOptLevel     int    `json:"CodeGenOptLevel"`
	TunedMaxThreads     int    `json:"TunedMaxThreads"`
	MinBlocksPerSM      int    `json:"MinBlocksPerSM"`
}

// Validate checks what the entry says beyond its configuration, which
// ReadMnemeTuned checks itself: the statistics word, classes that name each
// launch shape once with a valid configuration, and folded arguments that
// a configuration folds, described as the statistics they rest on allow
// (checkFoldingFacts). A file that fails it is refused for that kernel,
// whose launches then run the application's own code.
func (tk *TunedKernel) Validate() error {
	switch tk.Statistics {
	case "", "run", "none":
	default:
		return fmt.Errorf("statistics %q: want run or none", tk.Statistics)
	}
	seen := map[[7]uint32]int{}
	for i, c := range tk.Classes {
		g, b := c.Grid, c.Block
		if g.X == 0 || b.X == 0 {
			return fmt.Errorf("classes[%d]: grid %s block %s: a class names a launch shape (positive grid.x and block.x)", i, g, b)
		}
		g, b = normDim(g), normDim(b)
		key := [7]uint32{g.X, g.Y, g.Z, b.X, b.Y, b.Z, c.SharedMem}
		if j, ok := seen[key]; ok {
			return fmt.Errorf("classes[%d] and classes[%d] overlap: both name grid %s block %s shared memory %d", j, i, g, b, c.SharedMem)
		}
		seen[key] = i
		if err := checkCompileConfig(c.Config); err != nil {
			return fmt.Errorf("classes[%d].config: %w", i, err)
		}
	}
	if len(tk.Folded) > 0 && tk.Statistics == "none" {
		return fmt.Errorf("folded: arguments folded although the entry says it had no statistics")
	}
	for i, f := range tk.Folded {
		if f.Arg < 0 || !tk.folds(f.Arg) {
			return fmt.Errorf("folded[%d]: argument %d is not one the configuration folds", i, f.Arg)
		}
		for _, v := range f.Values {
			if _, err := hex.DecodeString(v); err != nil {
				return fmt.Errorf("folded[%d]: value %q is not hex", i, v)
			}
		}
	}
	return tk.checkFoldingFacts()
}

// folds tells whether the entry's configuration, or one of its classes',
// folds argument a.
func (tk *TunedKernel) folds(a int) bool {
	folds := func(c mneme.Config) bool {
		return c.Specialize && (len(c.SpecializeArgs) == 0 || slices.Contains(c.SpecializeArgs, a))
	}
	if folds(tk.Config) {
		return true
	}
	return slices.ContainsFunc(tk.Classes, func(c TunedClass) bool { return folds(c.Config) })
}
