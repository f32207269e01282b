package deploy

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/mneme-gpu/mneme"
)

// Check statuses.
const (
	StatusDeployed = "deployed"       // the kernel runs its tuned code
	StatusOriginal = "own-code"       // tuning found the application's own code best
	StatusUnknown  = "not-in-program" // the executable has no kernel of that name
	StatusInvalid  = "invalid"        // its configuration cannot compile (a pipeline LLVM does not parse): the application's own code runs
)

// CheckRow is one tuned kernel as `mneme deploy check` reports it.
type CheckRow struct {
	Kernel, Status, Source, Note string
}

// CheckReport says which tuned kernels an executable has.
type CheckReport struct {
	Rows    []CheckRow
	Matched int // kernels the executable has (deployed or original)
}

// Check compares tuned plans with an executable's kernels (mangled names)
// and the GPU at hand ("" when none): unknown names, kernels tuned on
// another GPU, and what each entry will do at run time.
func Check(plans Plans, kernels []string, gpu string) CheckReport {
	return CheckWith(plans, kernels, gpu, nil)
}

// CheckWith is Check with the compile configurations checked by valid (nil:
// not checked): a kernel whose tuned configuration cannot compile is
// reported invalid, with the reason, and not counted as matched.
func CheckWith(plans Plans, kernels []string, gpu string, valid func(*Plan) error) CheckReport {
	var rep CheckReport
	for _, n := range slices.Sorted(maps.Keys(plans)) {
		p := plans[n]
		row := CheckRow{Kernel: n, Source: p.Source}
		var notes []string
		switch {
		case !slices.Contains(kernels, n):
			row.Status = StatusUnknown
			if s := closest(n, kernels); s != "" {
				notes = append(notes, "did you mean "+s+"?")
			}
		case p.Original:
			row.Status = StatusOriginal
			rep.Matched++
		case valid != nil && valid(p) != nil:
			row.Status = StatusInvalid
			notes = append(notes, valid(p).Error())
		default:
			row.Status = StatusDeployed
			rep.Matched++
			notes = append(notes, describe(p))
		}
		rep.addRow(row, notes, p, gpu)
	}
	return rep
}

// addRow adds row with its notes, and a note when p was tuned on another
// GPU than gpu.
func (rep *CheckReport) addRow(row CheckRow, notes []string, p *Plan, gpu string) {
	if p.TunedGPU != "" && gpu != "" && p.TunedGPU != gpu {
		notes = append(notes, fmt.Sprintf("tuned on %s, this GPU is %s", p.TunedGPU, gpu))
	}
	row.Note = strings.Join(notes, "; ")
	rep.Rows = append(rep.Rows, row)
}

// describe is a short account of what a plan changes.
func describe(p *Plan) string {
	c := p.Config
	parts := []string{c.Passes, fmt.Sprintf("codegen O%d", c.CodegenOpt)}
	if c.Specialize {
		parts = append(parts, "args folded per value set")
	}
	if c.SpecializeDims {
		parts = append(parts, "dims folded")
	}
	if c.SetLaunchBounds {
		parts = append(parts, fmt.Sprintf("launch bounds %d,%d", c.MaxThreads, c.MinBlocksPerSM))
	}
	if !p.TunedBlock.IsZero() {
		parts = append(parts, "block "+p.TunedBlock.String())
	}
	if len(p.Classes) > 0 {
		parts = append(parts, fmt.Sprintf("%d launch-shape classes (other shapes keep their own code)", len(p.Classes)))
	}
	return strings.Join(parts, ", ")
}

// closest is the executable's kernel sharing the longest prefix with name,
// when the names share at least their first half: a kernel renamed or
// re-templated since tuning.
func closest(name string, kernels []string) string {
	best, bestLen := "", len(name)/2
	for _, k := range kernels {
		n := 0
		for n < len(k) && n < len(name) && k[n] == name[n] {
			n++
		}
		if n > bestLen {
			best, bestLen = k, n
		}
	}
	return best
}

// Launch is one recorded launch of a kernel: what a variant keyed on values
// is compiled for.
type Launch struct {
	Grid, Block mneme.Dim3
	SharedMem   uint32
	Args        [][]byte
}

// PrecompileJob is one variant `mneme deploy precompile` compiles.
type PrecompileJob struct {
	Kernel string
	Label  string
	Config mneme.Config // as the runtime would compile it for the launch
	Args   [][]byte
}

// PrecompileJobs lists the variants to compile for the executable's tuned
// kernels: one per kernel whose configuration folds nothing, and one per
// recorded launch (deduplicated by the runtime's key later) for those that
// fold values or dimensions. A kernel with launch-shape classes is listed
// per class, each with its own configuration and shape, and a recorded
// launch goes to the class of its shape (none: nothing to compile).
// Kernels that fold values and have no recorded launch are skipped: their
// variants are compiled at run time.
func PrecompileJobs(plans Plans, kernels []string, launches map[string][]Launch) []PrecompileJob {
	var jobs []PrecompileJob
	for _, n := range slices.Sorted(maps.Keys(plans)) {
		p := plans[n]
		if p.Original || !slices.Contains(kernels, n) {
			continue
		}
		if len(p.Classes) == 0 {
			jobs = append(jobs, planJobs(n, p, launches[n], "")...)
			continue
		}
		for i, c := range p.Classes {
			var ls []Launch
			for _, l := range launches[n] {
				if p.For(l.Grid, l.Block, l.SharedMem) == &c.Plan {
					ls = append(ls, l)
				}
			}
			if len(ls) == 0 && c.Config.SpecializeDims && !c.Config.Specialize {
				// The dimensions folded are the class's own.
				ls = []Launch{{Grid: c.RecordedGrid, Block: c.RecordedBlock, SharedMem: c.SharedMem}}
			}
			jobs = append(jobs, planJobs(n, &c.Plan, ls, fmt.Sprintf("class %d, ", i+1))...)
		}
	}
	return jobs
}

// planJobs are the jobs of one plan (a kernel's, or one class's) given the
// recorded launches it serves.
func planJobs(n string, p *Plan, ls []Launch, label string) []PrecompileJob {
	if !p.Config.Specialize && !p.Config.SpecializeDims {
		block := p.RecordedBlock
		var args [][]byte
		if len(ls) > 0 {
			block, args = ls[0].Block, ls[0].Args
		}
		_, block = p.Geometry(mneme.Dim3{X: 1, Y: 1, Z: 1}, block)
		cfg := p.ConfigFor(block)
		cfg.Grid, cfg.Block = mneme.Dim3{}, mneme.Dim3{}
		return []PrecompileJob{{Kernel: n, Label: label + "generic", Config: cfg, Args: args}}
	}
	var jobs []PrecompileJob
	for i, l := range ls {
		grid, block := p.Geometry(l.Grid, l.Block)
		cfg := launchConfig(p.ConfigFor(block), grid, block)
		jobs = append(jobs, PrecompileJob{Kernel: n, Label: fmt.Sprintf("%srecorded launch %d", label, i+1), Config: cfg, Args: l.Args})
	}
	return jobs
}
