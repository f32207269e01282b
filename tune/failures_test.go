package tune

import (
	"testing"

	"github.com/mneme-gpu/mneme"
)

// trialsWith makes n trials with the given specialize value (passes
// cycling through two pipelines, so that parameter explains nothing),
// failed ones with status st.
func trialsWith(spec bool, n, failed int, st mneme.Status) []Trial {
	var out []Trial
	for i := range n {
		t := Trial{Params: Point{"specialize": spec, "passes": []string{"default<O1>", "default<O3>"}[i%2]}, Status: mneme.StatusVerified, TimeNS: 100}
		if i < failed {
			t.Status, t.TimeNS = st, 0
		}
		out = append(out, t)
	}
	return out
}

func TestFailurePatternNamesTheValueTheFailuresShare(t *testing.T) {
	baseline := Trial{Number: 0, Params: BaselineParams(), Status: mneme.StatusFailedVerification}
	cases := []struct {
		name   string
		trials []Trial
		want   string
	}{
		{"every folded trial failed, no other did",
			append(append([]Trial{baseline}, trialsWith(true, 20, 20, mneme.StatusFailedVerification)...), trialsWith(false, 21, 0, "")...),
			"every trial with specialize=true failed (20 of 20: failed_verification 20); with other values 0 of 21 failed"},
		{"the other value fails a little too",
			append(trialsWith(true, 20, 20, mneme.StatusFailedVerification), trialsWith(false, 20, 5, mneme.StatusRuntimeError)...),
			"every trial with specialize=true failed (20 of 20: failed_verification 20); with other values 5 of 20 failed"},
		{"the other value fails more than a quarter of its trials",
			append(trialsWith(true, 20, 20, mneme.StatusFailedVerification), trialsWith(false, 20, 6, mneme.StatusRuntimeError)...), ""},
		{"one folded trial verified",
			append(trialsWith(true, 20, 19, mneme.StatusFailedVerification), trialsWith(false, 21, 0, "")...), ""},
		{"too few trials with the value",
			append(trialsWith(true, 2, 2, mneme.StatusFailedVerification), trialsWith(false, 21, 0, "")...), ""},
		{"three are enough",
			append(trialsWith(true, 3, 3, mneme.StatusCompileError), trialsWith(false, 21, 0, "")...),
			"every trial with specialize=true failed (3 of 3: compile_error 3); with other values 0 of 21 failed"},
		{"nothing failed", append(trialsWith(true, 20, 0, ""), trialsWith(false, 21, 0, "")...), ""},
		{"a parameter with one value explains nothing", trialsWith(true, 20, 20, mneme.StatusFailedVerification), ""},
	}
	for _, c := range cases {
		if got := FailurePattern(c.trials); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

// Of two values that each explain failures, the one that explains more is
// named.
func TestFailurePatternPrefersTheLargerShare(t *testing.T) {
	var trials []Trial
	for i := range 30 {
		p := Point{"block_x": 64 * (1 + i%3), "specialize": i%2 == 0}
		st := mneme.StatusVerified
		if i%3 == 2 || (i%2 == 0 && i < 8) { // block 192 always fails; a few folded ones too
			st = mneme.StatusInvalidLaunch
		}
		trials = append(trials, Trial{Params: p, Status: st})
	}
	want := "every trial with block_x=192 failed (10 of 10: invalid_launch 10); with other values 3 of 20 failed"
	if got := FailurePattern(trials); got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

// The pattern says how far the failing trials' float outputs were from the
// recording's, the largest over their typed buffers that failed (not the
// ones that passed, not untyped ones, not other statuses), so the user can
// judge a wider bound.
func TestFailurePatternSaysHowFarTheOutputsWere(t *testing.T) {
	failed := func(bufs ...mneme.BufferVerification) *mneme.Result {
		return &mneme.Result{Status: mneme.StatusFailedVerification, Verification: bufs}
	}
	trials := append(trialsWith(true, 3, 3, mneme.StatusFailedVerification), trialsWith(false, 21, 0, "")...)
	trials[0].Result = failed(mneme.BufferVerification{Type: "f32", MaxULP: 850, MaxRel: 1.2e-4},
		mneme.BufferVerification{Type: "f32", Passed: true, MaxULP: 5000, MaxRel: 0.5},
		mneme.BufferVerification{Type: "untyped", MaxULP: 7000, MaxRel: 0.9})
	trials[1].Result = failed(mneme.BufferVerification{Type: "f64", MaxULP: 40, MaxRel: 3e-3})
	trials[2].Result = failed()
	trials[5].Result = failed(mneme.BufferVerification{Type: "f32", MaxULP: 9999, MaxRel: 0.7}) // verified trial: not counted
	want := "every trial with specialize=true failed (3 of 3: failed_verification 3); with other values 0 of 21 failed; " +
		"their float outputs were at most 850 ulp (relative 0.003) from the recording's"
	if got := FailurePattern(trials); got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}
