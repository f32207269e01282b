package tune

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/geometry"
)

// TestProbeConfigWhereFindsADivisor checks that the probe of a kernel under
// the exact-cover rule is a block that divides the recorded threads: the
// half block when it does, else the nearest multiple of the warp that does.
func TestProbeConfigWhereFindsADivisor(t *testing.T) {
	lim := mneme.DeviceLimits{}
	for _, c := range []struct {
		block, grid  uint32
		wantB, wantG uint32
		want         bool
	}{
		{256, 4, 128, 8, true}, // half divides 1024
		{224, 5, 160, 7, true}, // half (96) does not divide 1120; 192 and 256 neither
		{32, 1, 0, 0, false},   // 32 threads: no other multiple of 32 divides them
		{1000, 1, 0, 0, false}, // 1000 = 8 x 125: no multiple of the warp divides it
	} {
		base := mneme.Config{Grid: mneme.Dim3{X: c.grid, Y: 1, Z: 1}, Block: mneme.Dim3{X: c.block, Y: 1, Z: 1}}
		exact := func(cfg mneme.Config) bool {
			return geometry.CoversExactly(cfg.Grid, cfg.Block, base.Grid, base.Block)
		}
		got, ok := probeConfigWhere(base, lim, exact)
		if ok != c.want || (ok && (got.Block.X != c.wantB || got.Grid.X != c.wantG || !exact(got))) {
			t.Errorf("block %d grid %d: probe block %d grid %d (%v), want block %d grid %d (%v)", c.block, c.grid, got.Block.X, got.Grid.X, ok, c.wantB, c.wantG, c.want)
		}
	}
}

// TestRunExactCoverResumes: a resumed run keeps the exact-cover rule from
// geometry.json, so its space (and hash) is the one it started with.
func TestRunExactCoverResumes(t *testing.T) {
	ro, _, stderr := runOptions(t, "TESTWORKER_THREADS=1024")
	ro.Options.Preset, ro.Options.Trials = "standard", 3
	ro.AnalyzeGeometry = func(string, string) (geometry.Facts, error) {
		return geometry.Facts{ThreadIDDims: [3]bool{true}, GlobalIndexAccess: true}, nil
	}
	if err := Run(context.Background(), ro); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	ro.Resume, ro.Options.Trials = true, 10
	ro.AnalyzeGeometry = nil // the decision must come from geometry.json
	if err := Run(context.Background(), ro); err != nil {
		t.Fatalf("resume: %v\n%s", err, stderr)
	}
	trials, _, _ := ReadTrials(filepath.Join(ro.Options.Output, TrialsFile))
	for _, tr := range trials {
		if 1024%tr.Config.Block.X != 0 || tr.Status != mneme.StatusVerified {
			t.Errorf("trial %d: block %s, %s", tr.Number, tr.Config.Block, tr.Status)
		}
	}
}
