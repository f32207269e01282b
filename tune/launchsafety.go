package tune

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/geometry"
	"github.com/mneme-gpu/mneme/internal/safefile"
)

// GeometryAnalyzer reads the launch-geometry facts of kernel (mangled name)
// from the IR file at irPath. The tuner stays free of cgo: mneme passes the
// analysis of package llvm.
type GeometryAnalyzer func(irPath, kernel string) (geometry.Facts, error)

// GeometryReport is geometry.json: whether the kernel depends on its launch
// geometry, why, and what the run did about it under its launch safety.
type GeometryReport struct {
	geometry.Decision
	LaunchSafety string `json:"launch_safety"`
	// LaunchSearched is whether block and grid shapes are part of the search.
	LaunchSearched bool `json:"launch_searched"`
	// BlockRule, when set, says which rules limited the block shapes
	// searched (an unguarded global index: only blocks that divide the
	// recorded threads; the kernel's own launch bound).
	BlockRule string `json:"block_rule,omitempty"`
	// Note says it in one line, for the log and the summary.
	Note string `json:"note"`
	// MachineCode: the kernel was recorded as machine code only, so nothing
	// could be analysed and every block shape was verified instead; a
	// verified tuned block is deployed (for launches of the recorded block),
	// there being no IR that could ever prove more.
	MachineCode bool `json:"machine_code,omitempty"`
}

// launchFixedConstraint marks a space whose launch is held at the recorded
// one; as a constraint name it shows in search_space.json and in the hash.
const launchFixedConstraint = "launch fixed at the recorded grid and block (launch safety: geometry-dependent kernel)"

// decideGeometry decides from the kernel's IR whether it depends on its block
// shape; without an analyzer, or when the analysis fails, it counts as
// dependent.
func (t *target) decideGeometry(analyze GeometryAnalyzer, dbDir string) geometry.Decision {
	if t.kernel.MachineCodeOnly() {
		d := geometry.Unknown("recorded as machine code only: no IR to analyze")
		if t.kernel.DeviceCode != "" {
			d.MaxThreads = machineCodeLaunchBound(filepath.Join(dbDir, t.kernel.DeviceCode), t.kernel.Device.Arch, t.kernel.KernelName)
		}
		return d
	}
	if analyze == nil {
		return geometry.Unknown("no IR analysis available")
	}
	if len(t.kernel.Modules) == 0 {
		return geometry.Unknown("the recording names no IR module")
	}
	facts, err := analyze(filepath.Join(dbDir, t.kernel.Modules[0]), t.kernel.KernelName)
	if err != nil {
		return geometry.Unknown(err.Error())
	}
	return geometry.Decide(facts, normDim(t.inst.BlockDims))
}

// fixLaunch holds the space's launch at the recorded grid and block: a
// preset is rebuilt without its block parameters; a file space derives as
// before and then gets the recorded geometry (launch bounds follow the
// recorded block).
func (t *target) fixLaunch(opts *Options) error {
	if opts.SpaceFile == "" {
		s, err := presetSpace(opts.Preset, opts.SpaceShape, t.launch, t.limits, false)
		if err != nil {
			return mneme.BadInput(err)
		}
		t.space = s
	} else {
		base := t.space.Baseline
		derive := t.space.Derive
		t.space.Derive = func(pt Point) (mneme.Config, error) {
			c, err := derive(pt)
			if err != nil {
				return c, err
			}
			c.Grid, c.Block, c.SharedMem = base.Grid, base.Block, base.SharedMem
			if c.SetLaunchBounds {
				c.MaxThreads = int(base.Block.Count())
			}
			return c, nil
		}
	}
	if t.fold != nil && opts.SpaceFile == "" {
		t.space.applyFold(*t.fold) // the rebuilt preset folds no more than before
	}
	t.space.Constraints = append(t.space.Constraints, Constraint{Name: launchFixedConstraint, Check: func(Point) (bool, error) { return true, nil }})
	opts.SpaceHash = t.space.Hash()
	return nil
}

// launchFixed reports whether the space holds the recorded launch.
func (s *Space) launchFixed() bool { return s.hasConstraint(launchFixedConstraint) }

// hasConstraint reports whether the space carries the constraint named
// name (the launch rules mark a space so).
func (s *Space) hasConstraint(name string) bool {
	return slices.ContainsFunc(s.Constraints, func(c Constraint) bool { return c.Name == name })
}

// searchesLaunch reports whether some point of the space derives another
// grid or block than the baseline's (it looks at up to 256 random points).
func (s *Space) searchesLaunch() bool {
	return s.hasPointWhere(func(pt Point) bool {
		c, err := s.Evaluate(pt)
		return err == nil && (c.Grid != s.Baseline.Grid || c.Block != s.Baseline.Block)
	})
}

// applyLaunchSafety decides geometry dependence and, under safe launch
// safety, holds a dependent kernel's launch. On resume the decision of the
// earlier run (geometry.json, which may hold a probe's outcome) is kept, so
// the space stays the one the run started with.
func (t *target) applyLaunchSafety(opts *Options, analyze GeometryAnalyzer, dbDir string, resume bool) (GeometryReport, error) {
	safety, err := ParseLaunchSafety(opts.LaunchSafety)
	if err != nil {
		return GeometryReport{}, mneme.BadInput(err)
	}
	if t.kernel.MachineCodeOnly() {
		// Nothing shows whether machine code depends on its block shape,
		// and its launch is all there is to tune: every shape is tried and
		// verified (aggressive with verification).
		safety = LaunchAggressive
	}
	opts.LaunchSafety = safety
	rep := GeometryReport{LaunchSafety: safety, MachineCode: t.kernel.MachineCodeOnly()}
	if old, ok := readGeometryReport(opts.Output); resume && ok {
		rep.Decision = old.Decision
	} else {
		rep.Decision = t.decideGeometry(analyze, dbDir)
	}
	searches := t.space.searchesLaunch()
	if safety == LaunchSafe && rep.Dependent && searches {
		if err := t.fixLaunch(opts); err != nil {
			return rep, err
		}
	} else if rep.ExactCover && searches && !t.limitToExactCover(opts) && safety == LaunchSafe {
		// No other block divides the recorded threads.
		if err := t.fixLaunch(opts); err != nil {
			return rep, err
		}
	}
	// The kernel's own launch bound holds whatever the launch safety: a
	// larger block cannot launch.
	if rep.MaxThreads > 0 && !t.space.launchFixed() && t.space.searchesLaunch() {
		t.limitToLaunchBound(opts, rep.MaxThreads)
	}
	rep.describe(t.space)
	return rep, nil
}

// describe fills in LaunchSearched and the note from the space as built.
func (r *GeometryReport) describe(s *Space) {
	r.LaunchSearched = !s.launchFixed() && s.searchesLaunch()
	var rules []string
	if r.LaunchSearched && s.exactCover() {
		rules = append(rules, blockRule(s.Baseline))
	}
	if r.LaunchSearched && s.launchBound() {
		rules = append(rules, geometry.LaunchBoundRule(r.MaxThreads))
	}
	r.BlockRule = strings.Join(rules, "; ")
	switch {
	case s.launchFixed():
		r.Note = fmt.Sprintf("launch safety %s: the recorded grid and block are kept; compiler knobs, launch bounds and specialization are tuned (%s)", r.LaunchSafety, r.Decision)
	case r.LaunchSearched && r.Dependent:
		r.Note = fmt.Sprintf("launch safety %s: block shapes are searched although the kernel is %s", r.LaunchSafety, r.Decision)
	case r.LaunchSearched:
		r.Note = fmt.Sprintf("launch safety %s: block shapes are searched (%s)", r.LaunchSafety, r.Decision)
	default:
		r.Note = fmt.Sprintf("the space keeps the recorded launch (%s)", r.Decision)
	}
	if r.BlockRule != "" {
		r.Note += "; " + r.BlockRule
	}
}

func readGeometryReport(dir string) (GeometryReport, bool) {
	var r GeometryReport
	// A results folder may come from elsewhere: a regular file inside it,
	// of bounded size (a FIFO there would block).
	data, err := safefile.ReadFileIn(dir, GeometryFile, safefile.MaxJSON)
	if err != nil || json.Unmarshal(data, &r) != nil {
		return r, false
	}
	return r, true
}

// probeConfig is the baseline with one other block shape, the grid
// recomputed to cover the same threads: half the block's x extent (at least
// a warp), or double it for a block narrower than two warps.
func probeConfig(base mneme.Config, lim mneme.DeviceLimits) (mneme.Config, bool) {
	lim = lim.WithDefaults()
	c := base
	bx := base.Block.X
	switch {
	case bx >= 2*uint32(lim.WarpSize):
		c.Block.X = bx / 2 / uint32(lim.WarpSize) * uint32(lim.WarpSize)
	case uint64(2*bx)*uint64(base.Block.Y)*uint64(base.Block.Z) <= uint64(lim.MaxThreadsPerBlock):
		c.Block.X = 2 * bx
	default:
		return c, false
	}
	c.Grid.X = uint32(ceilDiv(uint64(base.Grid.X)*uint64(bx), uint64(c.Block.X)))
	if c.SetLaunchBounds {
		c.MaxThreads = int(c.Block.Count())
	}
	return c, c.Block != base.Block
}

// bannableStatus reports whether a trial ending with st bans its block shape.
func bannableStatus(st mneme.Status) bool {
	return st == mneme.StatusInvalidLaunch || st == mneme.StatusRuntimeError
}
