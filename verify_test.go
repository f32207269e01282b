package mneme

import (
	"encoding/json"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The tuner's settings and the worker protocol wrote mode, atol and rtol
// before the command line's options shared the type; those bytes stay.
func TestVerifyOptionsEncodingUnchanged(t *testing.T) {
	v := VerifyOptions{Mode: VerifyTolerance, ATol: 1e-3}
	b, err := json.Marshal(v)
	if err != nil || string(b) != `{"mode":"tolerance","atol":0.001}` {
		t.Fatalf("JSON %s (%v)", b, err)
	}
	y, err := yaml.Marshal(v)
	if err != nil || string(y) != "mode: tolerance\natol: 0.001\nrtol: 0\n" {
		t.Fatalf("YAML %q (%v)", y, err)
	}
}

func TestVerifyOptionsValidate(t *testing.T) {
	for _, v := range []VerifyOptions{{}, {Mode: VerifyNone}, {Mode: VerifyAbs, Tolerance: 0.5, DType: VerifyF64}, {Mode: VerifyTolerance, ATol: 1, RTol: 2}} {
		if err := v.Validate(); err != nil {
			t.Errorf("%+v: %v", v, err)
		}
	}
	bad := map[string]VerifyOptions{
		`verify mode "fuzzy"`: {Mode: "fuzzy"},
		"tolerance -1":        {Mode: VerifyRel, Tolerance: -1},
		"rtol -1":             {Mode: VerifyTolerance, RTol: -1},
		`verify dtype "f16"`:  {DType: "f16"},
	}
	for want, v := range bad {
		if err := v.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: error %v, want %q", v, err, want)
		}
	}
	if d := (VerifyOptions{}).WithDefaults(); d.Mode != VerifyAuto || d.DType != VerifyF32 {
		t.Errorf("defaults %+v", d)
	}
}

func TestDeviceLimits(t *testing.T) {
	l := DeviceLimits{Name: "GPU", Arch: "sm_90", SMCount: 132, MaxThreadsPerBlock: 1024, MaxSharedMemPerBlock: 232448, RegsPerSM: 65536, WarpSize: 32}
	b, err := json.Marshal(l)
	want := `{"name":"GPU","arch":"sm_90","sm_count":132,"max_threads_per_block":1024,"max_shared_mem_per_block":232448,"regs_per_sm":65536,"warp_size":32}`
	if err != nil || string(b) != want {
		t.Fatalf("JSON %s (%v), want %s", b, err, want)
	}
	d := DeviceLimits{}.WithDefaults()
	if d.MaxThreadsPerBlock != 1024 || d.MaxSharedMemPerBlock != 48<<10 || d.RegsPerSM != 65536 || d.WarpSize != 32 || d.SMCount != 0 {
		t.Fatalf("defaults %+v", d)
	}
	c := Baseline(Dim3{8, 1, 1}, Dim3{512, 1, 1}, 0)
	if err := (DeviceLimits{MaxThreadsPerBlock: 256}).Check(c); err == nil || !strings.Contains(err.Error(), "block 512,1,1") {
		t.Errorf("Check: %v, want the block named", err)
	}
	c.SharedMem = 64 << 10
	if err := (DeviceLimits{}).Check(c); err == nil || !strings.Contains(err.Error(), "shared_mem") {
		t.Errorf("Check: %v, want shared_mem named", err)
	}
}
