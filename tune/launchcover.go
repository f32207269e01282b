package tune

import (
	"fmt"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/geometry"
)

// exactCoverConstraint marks a space whose launches must run exactly the
// recorded threads in every dimension; as a constraint name it shows in
// search_space.json and in the space's hash.
const exactCoverConstraint = "launch covers exactly the recorded threads (launch safety: unguarded global index)"

// limitToExactCover keeps the search to launches that cover exactly the
// recorded threads, for a kernel whose global index is unguarded
// (geometry.Decision.ExactCover): a block that does not divide them makes
// the grid, rounded up, run threads past the data. It reports false, and
// leaves the space as it was, when no point of the space but the recorded
// launch passes: the caller then holds the recorded launch.
func (t *target) limitToExactCover(opts *Options) bool {
	recorded := t.space.Baseline
	derive := t.space.Derive
	c := Constraint{Name: exactCoverConstraint, Check: func(pt Point) (bool, error) {
		cfg, err := derive(pt)
		if err != nil {
			return true, nil // Evaluate reports the derivation's own error
		}
		return geometry.CoversExactly(cfg.Grid, cfg.Block, recorded.Grid, recorded.Block), nil
	}}
	t.space.Constraints = append(t.space.Constraints, c)
	if !t.space.searchesLaunch() {
		t.space.Constraints = t.space.Constraints[:len(t.space.Constraints)-1]
		return false
	}
	opts.SpaceHash = t.space.Hash()
	return true
}

// exactCover reports whether the space carries the exact-cover constraint.
func (s *Space) exactCover() bool { return s.hasConstraint(exactCoverConstraint) }

// blockRule says, for the summary, how the exact-cover rule limited the
// blocks of a launch like base.
func blockRule(base mneme.Config) string {
	g, b := normDim(base.Grid), normDim(base.Block)
	return fmt.Sprintf("blocks limited to those that divide the recorded %d x %d x %d threads (%s)",
		uint64(g.X)*uint64(b.X), uint64(g.Y)*uint64(b.Y), uint64(g.Z)*uint64(b.Z), geometry.ExactCoverRuleText)
}

// probeConfigWhere is probeConfig for a space whose launches must pass ok:
// the half (or double) block first, then the other multiples of the warp
// size within the device's limit, nearest the recorded block.x first.
func probeConfigWhere(base mneme.Config, lim mneme.DeviceLimits, ok func(mneme.Config) bool) (mneme.Config, bool) {
	if c, found := probeConfig(base, lim); found && ok(c) {
		return c, true
	}
	lim = lim.WithDefaults()
	warp := uint32(lim.WarpSize)
	bx := base.Block.X
	rest := uint64(base.Block.Y) * uint64(base.Block.Z)
	for d := warp; d <= uint32(lim.MaxThreadsPerBlock); d += warp {
		for _, x := range []uint32{bx - min(bx, d), bx + d} {
			if x == 0 || x%warp != 0 || uint64(x)*rest > uint64(lim.MaxThreadsPerBlock) {
				continue
			}
			c := base
			c.Block.X = x
			c.Grid.X = uint32(ceilDiv(uint64(base.Grid.X)*uint64(bx), uint64(x)))
			if c.SetLaunchBounds {
				c.MaxThreads = int(c.Block.Count())
			}
			if ok(c) {
				return c, true
			}
		}
	}
	return base, false
}

// launchBoundConstraint marks a space whose blocks stay within the kernel's
// own launch bound; as a constraint name it shows in search_space.json and
// in the space's hash.
const launchBoundConstraint = "block within the kernel's own __launch_bounds__"

// limitToLaunchBound keeps the search to blocks of at most maxThreads
// threads, a kernel's own launch bound (geometry.Decision.MaxThreads): a
// larger block fails to launch, and each would otherwise cost a trial
// before the adaptive ban took it out. It reports whether the space had
// such a block (and is now limited).
func (t *target) limitToLaunchBound(opts *Options, maxThreads int) bool {
	derive := t.space.Derive
	fits := func(pt Point) (bool, error) {
		cfg, err := derive(pt)
		if err != nil {
			return true, nil // Evaluate reports the derivation's own error
		}
		return normDim(cfg.Block).Count() <= uint64(maxThreads), nil
	}
	if !t.space.hasPointWhere(func(pt Point) bool { ok, _ := fits(pt); return !ok }) {
		return false
	}
	t.space.Constraints = append(t.space.Constraints, Constraint{Name: launchBoundConstraint, Check: fits})
	opts.SpaceHash = t.space.Hash()
	return true
}

// launchBound reports whether the space carries the launch-bound
// constraint.
func (s *Space) launchBound() bool { return s.hasConstraint(launchBoundConstraint) }

// hasPointWhere reports whether one of up to 256 random points of the
// space (its constraints applied) satisfies pred.
func (s *Space) hasPointWhere(pred func(Point) bool) bool {
	r := NewRandom(s, 1)
	for range 256 {
		pt, ok := r.Ask()
		if !ok {
			break
		}
		if pred(pt) {
			return true
		}
	}
	return false
}
