package tune

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/deploy"
)

// KernelStats are a kernel's launch statistics over a whole recorded run,
// as the database keeps them: what tuning needs to know of the launches it
// did not record.
type KernelStats struct {
	// Launches counts every launch of the kernel in the run.
	Launches uint64
	// Shapes are its distinct launch shapes with their launch counts;
	// MoreShapes is set when the run had more than the statistics could
	// hold.
	Shapes     []ShapeStats
	MoreShapes bool
	// Args are per-argument facts, indexed by argument (0-based); an
	// argument the statistics do not cover has no entry.
	Args []ArgStats
}

// ShapeStats is one launch shape of a kernel and how often it occurred.
type ShapeStats struct {
	Grid      mneme.Dim3
	Block     mneme.Dim3
	SharedMem uint32
	Launches  uint64
}

// ArgStats says how one scalar argument behaved over the run.
type ArgStats struct {
	Arg int
	// Invariant is true when the argument held one value at every launch.
	Invariant bool
	// Distinct is the number of values seen; Capped is set when counting
	// stopped at a cap, so there were at least Distinct.
	Distinct int
	Capped   bool
}

// StatsSource gives a kernel's launch statistics from the database it was
// recorded in; (nil, nil) means the database has none (recorded before they
// existed).
type StatsSource func(dbDir string, k *db.Kernel) (*KernelStats, error)

// Statistics values of deploy.TunedKernel.
const (
	StatisticsRun  = "run"
	StatisticsNone = "none"
)

// FoldPolicy is what a tuning run may fold into the code: which scalar
// arguments, and whether launch dimensions. It rests on the run's statistics
// when there are some.
type FoldPolicy struct {
	// Statistics is StatisticsRun or StatisticsNone.
	Statistics string
	// Args are the 0-based scalar arguments that may be folded; Variants
	// the variants folding all of them makes the runtime compile.
	Args     []int
	Variants int
	// Dims is whether block and grid dimensions may be folded.
	Dims bool
	// Shapes is the number of launch shapes of the run (a configuration
	// folding the dimensions compiles one variant each); distinct the values
	// of each argument that took several (one variant each when folded).
	Shapes   int
	distinct map[int]int
	// Notes say why each argument or the dimensions were kept out, for the
	// log and the summary.
	Notes []string
}

// DecideFold decides what may be folded for kernel k from its run's
// statistics (nil: the database has none) and the runtime's variant cap:
//   - an argument folds when it held one value over the run, or when its
//     distinct values are few enough that one variant each, together with
//     the other folded arguments, stays within the cap (arguments are taken
//     in order of fewest values) and the instances tuned on (insts) hold
//     every one of those values, so the objective counts each variant;
//   - launch dimensions fold when the run's shapes are within the cap,
//     since each shape is a variant of its own;
//   - without statistics no argument folds (the one recorded value proves
//     nothing of the others), and dimensions fold, since the runtime keys
//     every variant by its shape.
func DecideFold(k *db.Kernel, stats *KernelStats, maxVariants int, insts []*db.Instance) FoldPolicy {
	var scalars []int
	for i, s := range k.Specializations {
		if s {
			scalars = append(scalars, i)
		}
	}
	if stats == nil {
		p := FoldPolicy{Statistics: StatisticsNone, Dims: true, Variants: 1}
		if len(scalars) > 0 {
			p.Notes = append(p.Notes, "the database has no launch statistics: no argument is folded, since the recorded values need not hold at other launches")
		}
		return p
	}
	p := FoldPolicy{Statistics: StatisticsRun, Variants: 1}
	byArg := map[int]ArgStats{}
	for _, a := range stats.Args {
		byArg[a.Arg] = a
	}
	type cand struct{ arg, distinct int }
	var cands []cand
	for _, i := range scalars {
		a, ok := byArg[i]
		switch {
		case !ok:
			p.Notes = append(p.Notes, fmt.Sprintf("argument %s: no statistics, not folded", argLabel(k, i)))
		case a.Invariant:
			p.Args = append(p.Args, i)
		case a.Capped || a.Distinct > maxVariants:
			p.Notes = append(p.Notes, fmt.Sprintf("argument %s: %s values over the run, more than the %d variants the runtime keeps: not folded", argLabel(k, i), distinctWord(a), maxVariants))
		case recordedValues(insts, i) < a.Distinct:
			p.Notes = append(p.Notes, fmt.Sprintf("argument %s: %d values over the run, %d of them in the instances tuned on: not folded, since the other variants could not be measured", argLabel(k, i), a.Distinct, recordedValues(insts, i)))
		default:
			cands = append(cands, cand{i, max(a.Distinct, 1)})
		}
	}
	slices.SortStableFunc(cands, func(a, b cand) int { return a.distinct - b.distinct })
	for _, c := range cands {
		if p.Variants*c.distinct > maxVariants {
			p.Notes = append(p.Notes, fmt.Sprintf("argument %s: %d values, with the arguments folded before it more than %d variants: not folded", argLabel(k, c.arg), c.distinct, maxVariants))
			continue
		}
		p.Variants *= c.distinct
		p.Args = append(p.Args, c.arg)
		if c.distinct > 1 {
			if p.distinct == nil {
				p.distinct = map[int]int{}
			}
			p.distinct[c.arg] = c.distinct
		}
	}
	slices.Sort(p.Args)
	shapes := max(len(stats.Shapes), 1)
	p.Shapes = shapes
	p.Dims = p.Variants*shapes <= maxVariants && !stats.MoreShapes
	switch {
	case stats.MoreShapes:
		p.Notes = append(p.Notes, fmt.Sprintf("launch dimensions: more than %d shapes over the run: not folded", len(stats.Shapes)))
	case !p.Dims:
		p.Notes = append(p.Notes, fmt.Sprintf("launch dimensions: %d shapes over the run, times %d argument variants, exceed the %d variants the runtime keeps: not folded", shapes, p.Variants, maxVariants))
	}
	return p
}

// recordedValues counts the distinct values argument i has in insts.
func recordedValues(insts []*db.Instance, i int) int {
	seen := map[string]bool{}
	for _, inst := range insts {
		if i < len(inst.Args) {
			seen[inst.Args[i]] = true
		}
	}
	return len(seen)
}

func argLabel(k *db.Kernel, i int) string {
	if i < len(k.ArgNames) && k.ArgNames[i] != "" {
		return fmt.Sprintf("%d (%s)", i, k.ArgNames[i])
	}
	return fmt.Sprint(i)
}

func distinctWord(a ArgStats) string {
	if a.Capped {
		return fmt.Sprintf("at least %d", a.Distinct)
	}
	return fmt.Sprint(a.Distinct)
}

// String says the policy in one line.
func (p FoldPolicy) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "folding (statistics: %s): ", p.Statistics)
	if len(p.Args) == 0 {
		b.WriteString("no argument")
	} else {
		fmt.Fprintf(&b, "arguments %v (%d variants)", p.Args, p.Variants)
	}
	if p.Dims {
		b.WriteString(", launch dimensions")
	} else {
		b.WriteString(", not the launch dimensions")
	}
	if len(p.Notes) > 0 {
		b.WriteString("; " + strings.Join(p.Notes, "; "))
	}
	return b.String()
}

// Restrict makes a configuration fold no more than the policy allows: a
// configuration that specializes folds only the allowed scalar arguments
// (none left: it does not specialize), and dimensions only when allowed.
func (p FoldPolicy) Restrict(c mneme.Config) mneme.Config {
	if c.Specialize {
		allowed := p.Args
		if len(c.SpecializeArgs) > 0 {
			allowed = nil
			for _, a := range c.SpecializeArgs {
				if slices.Contains(p.Args, a) {
					allowed = append(allowed, a)
				}
			}
		}
		c.SpecializeArgs = slices.Clone(allowed)
		c.Specialize = len(allowed) > 0
	}
	if !p.Dims {
		c.SpecializeDims = false
	}
	return c
}

// VariantFirstLaunchNS is what each compiled variant beyond the first costs
// the application: its first launch. Measured on an H100 (driver 580): a
// preloaded variant's first launch took up to 212-304 us, the application's
// own kernel's first launch (loading its code) ~260 us, which the first
// variant replaces. A configuration's objective across instances carries
// this cost for every variant it makes the runtime compile beyond one, and
// a launch-shape class must save more than it to get code of its own.
const VariantFirstLaunchNS = 200_000.0

// VariantsOf is how many variants the runtime compiles for configuration c
// under this policy: one per launch shape when c folds the dimensions,
// times one per value of each folded argument that took several.
func (p FoldPolicy) VariantsOf(c mneme.Config) int {
	if c.Original {
		return 0 // the application's own code: nothing is compiled
	}
	n := 1
	if c.SpecializeDims {
		n *= max(p.Shapes, 1)
	}
	if c.Specialize {
		for _, a := range c.SpecializeArgs {
			n *= max(p.distinct[a], 1)
		}
	}
	return n
}

// VariantCostNS is the first-launch cost of c's variants beyond the first,
// each costing perVariantNS.
func (p FoldPolicy) VariantCostNS(c mneme.Config, perVariantNS float64) float64 {
	return float64(max(p.VariantsOf(c)-1, 0)) * perVariantNS
}

// applyFold restricts every configuration the space derives to the policy.
func (s *Space) applyFold(p FoldPolicy) {
	derive := s.Derive
	s.Derive = func(pt Point) (mneme.Config, error) {
		c, err := derive(pt)
		if err != nil {
			return c, err
		}
		return p.Restrict(c), nil
	}
}

// foldedArgs describes the arguments the configurations fold (the entry's
// and its classes'), for the tuned file: the statistics' facts and the
// values in the instances measured.
func foldedArgs(configs []mneme.Config, k *db.Kernel, stats *KernelStats, insts []*db.Instance) []deploy.FoldedArg {
	var args []int
	for _, c := range configs {
		if !c.Specialize {
			continue
		}
		cargs := c.SpecializeArgs
		if len(cargs) == 0 {
			for i, s := range k.Specializations {
				if s {
					cargs = append(cargs, i)
				}
			}
		}
		for _, a := range cargs {
			if !slices.Contains(args, a) {
				args = append(args, a)
			}
		}
	}
	slices.Sort(args)
	var out []deploy.FoldedArg
	for _, i := range args {
		f := deploy.FoldedArg{Arg: i}
		if i < len(k.ArgNames) {
			f.Name = k.ArgNames[i]
		}
		if stats != nil {
			for _, a := range stats.Args {
				if a.Arg == i {
					f.Invariant, f.Distinct = a.Invariant, a.Distinct
				}
			}
		}
		seen := map[string]bool{}
		for _, inst := range insts {
			if i < len(inst.Args) && !seen[inst.Args[i]] {
				seen[inst.Args[i]] = true
				f.Values = append(f.Values, inst.Args[i])
			}
		}
		out = append(out, f)
	}
	return out
}

// useStats reads the kernel's statistics from source and restricts the
// space's folding to what they allow; without a source it does nothing.
func (t *target) useStats(opts *Options, source StatsSource, maxVariants int) error {
	if source == nil {
		return nil
	}
	stats, err := source(t.dbDir, t.kernel)
	if err != nil {
		return mneme.BadInput(fmt.Errorf("-rdb %s: launch statistics of %s: %w", opts.DB, t.kernel.Name(), err))
	}
	if maxVariants <= 0 {
		maxVariants = deploy.DefaultMaxVariants
	}
	p := DecideFold(t.kernel, stats, maxVariants, []*db.Instance{t.inst})
	t.space.applyFold(p)
	opts.SpaceHash = t.space.Hash()
	t.fold, t.stats = &p, stats
	return nil
}

// noteFolding writes to the log what the folding rested on and adds it to
// the kernel's tuned entry (the statistics and the values the folded
// arguments had), when useStats decided it. When the statistics show launch
// shapes other than the recorded one, the entry gets one class, the
// recorded shape's: the tuned code was measured on it alone, and the other
// shapes keep the application's code.
func (t *target) noteFolding(study *Study, sum Summary) error {
	if t.fold == nil {
		return nil
	}
	study.logf("%s", t.fold)
	m := t.asMember()
	uncovered := uncoveredShapes([]*member{m}, t.stats)
	study.logf("%s", t.coverage())
	if study.Results == nil {
		return nil
	}
	sum.Folding = t.fold.String()
	if err := study.Results.WriteJSON(SummaryFile, sum); err != nil {
		return err
	}
	if sum.BaselineIsBest {
		return nil
	}
	entries := map[string]TunedKernel{}
	if err := readJSONFile(filepath.Join(study.Opts.Output, MnemeTunedFile), &entries); err != nil {
		return err
	}
	tk, ok := entries[t.kernel.KernelName]
	if !ok {
		return fmt.Errorf("%s: the entry of %s is missing", MnemeTunedFile, t.kernel.KernelName)
	}
	tk.Statistics, tk.Folded = t.fold.Statistics, foldedArgs([]mneme.Config{tk.Config}, t.kernel, t.stats, []*db.Instance{t.inst})
	if len(uncovered) > 0 {
		s := instShape(t.inst)
		tk.Classes = []deploy.TunedClass{{Grid: s.grid, Block: s.block, SharedMem: s.shared, Config: tk.Config, Launches: m.launches,
			Speedup: tk.Speedup, TimeNS: tk.TimeNS, BaselineTimeNS: tk.BaselineTimeNS, Instances: []string{m.id}}}
	}
	return study.Results.MergeJSONMap(MnemeTunedFile, t.kernel.KernelName, tk)
}

// asMember is the single instance of a run as a member of one.
func (t *target) asMember() *member {
	return &member{t: t, id: t.kernel.StaticHash + "/" + t.inst.DynamicHash,
		launches: instanceWeights([]*db.Instance{t.inst}, t.stats)[0]}
}

// coverage is coverageNote for the single instance of a run.
func (t *target) coverage() string { return coverageNote([]*member{t.asMember()}, t.stats) }
