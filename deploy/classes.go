package deploy

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/mneme-gpu/mneme"
)

// A tuned entry may carry one configuration per launch-shape class and say
// which values of each folded argument its variants were measured with.
// The runtime then picks a launch's configuration by its shape (grid,
// block, dynamic shared memory as the application launched it) and folds
// only values that were measured: any other launch runs the application's
// own code, never something tuning did not see win.

// ClassPlan is the plan for the launches of one shape: its Plan's
// RecordedGrid and RecordedBlock are the class's grid and block (so
// Geometry applies the class's tuned block to exactly its launches) and its
// Config the class's compile knobs.
type ClassPlan struct {
	Plan
	SharedMem uint32
}

// FoldedValues are the values of one folded argument that a tuned entry's
// variants were measured with: a launch with another value does not run
// them.
type FoldedValues struct {
	Arg    int
	Name   string
	Values [][]byte
}

// For is the plan that serves a launch of this shape: p itself when it has
// no classes, else the class whose grid, block and dynamic shared memory
// the launch has; nil when no class covers the shape (the application's
// own code runs: tuning never measured it).
func (p *Plan) For(grid, block mneme.Dim3, shared uint32) *Plan {
	if len(p.Classes) == 0 {
		return p
	}
	grid, block = normDim(grid), normDim(block)
	for _, c := range p.Classes {
		if c.RecordedGrid == grid && c.RecordedBlock == block && c.SharedMem == shared {
			return &c.Plan
		}
	}
	return nil
}

// served are the plans whose configurations launches may run: the classes
// when there are some, else p.
func (p *Plan) served() []*Plan {
	if len(p.Classes) == 0 {
		return []*Plan{p}
	}
	out := make([]*Plan, len(p.Classes))
	for i, c := range p.Classes {
		out[i] = &c.Plan
	}
	return out
}

// Unmeasured tells whether a launch folding args under cfg would fold a
// value the entry's variants were not measured with: it returns the first
// such argument. An argument the entry gives no values for (an older file,
// or one folded through an annotation) is not restricted.
func (p *Plan) Unmeasured(cfg mneme.Config, args [][]byte) (arg int, ok bool) {
	if !cfg.Specialize {
		return 0, false
	}
	for _, f := range p.Folded {
		if len(cfg.SpecializeArgs) > 0 && !slices.Contains(cfg.SpecializeArgs, f.Arg) {
			continue
		}
		if f.Arg >= len(args) {
			continue
		}
		if !slices.ContainsFunc(f.Values, func(v []byte) bool { return bytes.Equal(v, args[f.Arg]) }) {
			return f.Arg, true
		}
	}
	return 0, false
}

// foldedLabel names argument i for a warning.
func (p *Plan) foldedLabel(i int) string {
	for _, f := range p.Folded {
		if f.Arg == i && f.Name != "" {
			return fmt.Sprintf("%d (%s)", i, f.Name)
		}
	}
	return fmt.Sprint(i)
}

// classPlans turns an entry's classes into plans; tk has passed Validate.
func classPlans(kernel, path string, tk *TunedKernel) []*ClassPlan {
	var out []*ClassPlan
	for _, c := range tk.Classes {
		cp := &ClassPlan{SharedMem: c.SharedMem, Plan: Plan{Kernel: kernel, Source: path, Config: compileKnobs(c.Config),
			RecordedGrid: normDim(c.Grid), RecordedBlock: normDim(c.Block), TunedGPU: tk.GPU}}
		if cp.Config.Passes == "" {
			cp.Config.Passes = mneme.DefaultPipeline
		}
		if tk.LaunchSearched && !c.Config.Block.IsZero() {
			if b := normDim(c.Config.Block); b != cp.RecordedBlock {
				cp.TunedBlock = b
			}
		}
		out = append(out, cp)
	}
	return out
}

// foldedValues are the entry's folded arguments that name their values,
// decoded; tk has passed Validate (the values are hex).
func foldedValues(tk *TunedKernel) []FoldedValues {
	var out []FoldedValues
	for _, f := range tk.Folded {
		if len(f.Values) == 0 {
			continue
		}
		fv := FoldedValues{Arg: f.Arg, Name: f.Name}
		for _, v := range f.Values {
			b, _ := hex.DecodeString(v)
			fv.Values = append(fv.Values, b)
		}
		out = append(out, fv)
	}
	return out
}

// checkFoldingFacts checks that an entry's folding agrees with the
// statistics it names: with none, no configuration folds argument values
// (the one recorded value proves nothing of the others); with the run's,
// every argument a configuration names to fold is described in Folded, and
// each description agrees with itself (an argument that held one value has
// one value; no more values than the run gave it).
func (tk *TunedKernel) checkFoldingFacts() error {
	configs := []mneme.Config{tk.Config}
	for _, c := range tk.Classes {
		configs = append(configs, c.Config)
	}
	for _, c := range configs {
		if !c.Specialize {
			continue
		}
		switch tk.Statistics {
		case "none":
			return fmt.Errorf("statistics none: a configuration folds argument values, which needs the run's launch statistics")
		case "run":
			for _, a := range c.SpecializeArgs {
				if !slices.ContainsFunc(tk.Folded, func(f FoldedArg) bool { return f.Arg == a }) {
					return fmt.Errorf("folded: argument %d is folded but has no statistics in the entry", a)
				}
			}
		}
	}
	for i, f := range tk.Folded {
		if f.Invariant && len(f.Values) > 1 {
			return fmt.Errorf("folded[%d]: argument %d held one value over the run but lists %d", i, f.Arg, len(f.Values))
		}
		if f.Distinct > 0 && len(f.Values) > f.Distinct {
			return fmt.Errorf("folded[%d]: argument %d took %d values over the run but lists %d", i, f.Arg, f.Distinct, len(f.Values))
		}
		if f.Distinct < 0 {
			return fmt.Errorf("folded[%d]: distinct %d: want 0 or more", i, f.Distinct)
		}
	}
	return nil
}
