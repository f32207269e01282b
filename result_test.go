package mneme

import (
	"encoding/json"
	"testing"
)

func TestStatusJSONRoundTrip(t *testing.T) {
	for _, s := range append(Statuses(), "from_a_newer_worker") {
		r := Result{Status: s}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		// The status is the plain string on disk and on the wire.
		var raw map[string]any
		if err := json.Unmarshal(b, &raw); err != nil || raw["status"] != string(s) {
			t.Fatalf("%s: JSON %s, want status %q", s, b, string(s))
		}
		var back Result
		if err := json.Unmarshal(b, &back); err != nil || back.Status != s {
			t.Fatalf("%s: read back %q (%v)", s, back.Status, err)
		}
	}
	// A map keyed by status (a summary's counts) keeps its string keys.
	b, err := json.Marshal(map[Status]int{StatusTimeout: 2})
	if err != nil || string(b) != `{"timeout":2}` {
		t.Fatalf("map JSON %s (%v)", b, err)
	}
	var m map[Status]int
	if err := json.Unmarshal(b, &m); err != nil || m[StatusTimeout] != 2 {
		t.Fatalf("map read back %v (%v)", m, err)
	}
}

func TestStatusKnown(t *testing.T) {
	want := []string{"verified", "invalid_launch", "invalid_config", "compile_error", "runtime_error",
		"failed_verification", "internal_error", "timeout", "crashed"}
	if len(Statuses()) != len(want) {
		t.Fatalf("Statuses() = %v", Statuses())
	}
	for i, s := range Statuses() {
		if string(s) != want[i] || !s.Known() || s.String() != want[i] {
			t.Errorf("status %d = %q, want %q and known", i, s, want[i])
		}
	}
	if Status("").Known() || Status("VERIFIED").Known() {
		t.Error("an unknown status reads as known")
	}
}

// The per-buffer figures keep their documented JSON names; an equal buffer
// has no first_index.
func TestResultVerificationJSON(t *testing.T) {
	first := uint64(17)
	r := Result{Status: StatusVerified, Verification: []BufferVerification{
		{Buffer: "allocation 0x7f4c00000000 (arg 2)", Type: "f32", Bound: "16 ulp or rel 1e-05", Passed: true,
			Elements: 1024, Differing: 3, MaxAbs: 2.4e-7, MaxRel: 1.2e-7, MaxULP: 2, FirstIndex: &first, Got: "1.0000001", Want: "1"},
		{Buffer: "global counter", Type: "untyped", Bound: "bitwise", Passed: true, Elements: 4},
	}}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Verification []map[string]any `json:"verification"`
	}
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	v := back.Verification
	if len(v) != 2 || v[0]["first_index"] != 17.0 || v[0]["max_ulp"] != 2.0 || v[0]["got"] != "1.0000001" || v[0]["type"] != "f32" {
		t.Fatalf("figures in JSON: %s", data)
	}
	if _, ok := v[1]["first_index"]; ok {
		t.Errorf("an equal buffer has a first_index: %s", data)
	}
	if _, ok := v[1]["non_finite"]; ok {
		t.Errorf("non_finite 0 is not omitted: %s", data)
	}
}
