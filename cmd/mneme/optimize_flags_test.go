package main

import "testing"

// The result key names how tuning timed the trials only when not by
// default, so results tuned by default keep their keys; each input alone.
func TestTuneConditions(t *testing.T) {
	for _, tc := range []struct {
		timer string
		cold  bool
		want  string
	}{
		{"", false, ""},
		{"auto", false, ""},
		{"events", false, "timer=events"},
		{"cupti", false, "timer=cupti"},
		{"", true, "cold_l2"},
		{"events", true, "timer=events,cold_l2"},
	} {
		if got := tuneConditions(tc.timer, tc.cold); got != tc.want {
			t.Errorf("timer %q cold %v: %q, want %q", tc.timer, tc.cold, got, tc.want)
		}
	}
}
