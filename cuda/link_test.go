package cuda

import (
	"fmt"
	"strings"
	"testing"
)

func TestParseArch(t *testing.T) {
	good := map[string]int{"sm_90": 90, "sm_80": 80, "compute_75": 75, "sm_90a": 0x10000 + 90, "sm_100": 100, " sm_86 ": 86}
	for in, want := range good {
		got, err := ParseArch(in)
		if err != nil || got != want {
			t.Errorf("ParseArch(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "sm", "sm_", "sm_9", "gfx90a", "sm_x0", "sm_90b", "sm_-90", "sm_99999"} {
		if _, err := ParseArch(in); err == nil {
			t.Errorf("ParseArch(%q) accepted", in)
		} else if !strings.Contains(err.Error(), "arch") {
			t.Errorf("ParseArch(%q) error %q does not name the arch", in, err)
		}
	}
}

func TestJITOptionsValidation(t *testing.T) {
	_, human, err := JITOptions{OptLevel: 3, MaxRegisters: 64, Arch: "sm_90"}.validate()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(human, " "), "-O3 --maxrregcount=64 --gpu-name=sm_90"; got != want {
		t.Fatalf("options %q, want %q", got, want)
	}
	_, human, err = JITOptions{OptLevel: -1}.validate()
	if err != nil || strings.Join(human, " ") != "-O4" {
		t.Fatalf("default options %q, %v; want -O4", human, err)
	}
	for _, o := range []JITOptions{{OptLevel: 5}, {OptLevel: -2}, {MaxRegisters: -1}, {MaxRegisters: 256}, {Arch: "volta"}} {
		if _, _, err := o.validate(); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

// A verbose ptxas log (two functions) followed by the linker's section, as
// older drivers write it.
const sampleLog = `ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'saxpy' for 'sm_90'
ptxas info    : Function properties for saxpy
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, used 0 barriers, 384 bytes cmem[0]
ptxas info    : Compiling entry function '_Z5heavyPfi' for 'sm_90'
ptxas info    : Function properties for _Z5heavyPfi
    96 bytes stack frame, 48 bytes spill stores, 40 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 2048 bytes smem, 364 bytes cmem[0], 8 bytes cmem[2]
info    : 0 bytes gmem
info    : Function properties for 'saxpy':
info    : used 10 registers, 0 stack, 0 bytes smem, 384 bytes cmem[0], 0 bytes lmem
info    : Function properties for '_Z5heavyPfi':
info    : used 32 registers, 96 stack, 2048 bytes smem, 364 bytes cmem[0], 136 bytes lmem`

// The log CUDA 13's driver JIT writes (measured on an H200, driver 580).
const cuda13Log = `info    : 4 bytes gmem
info    : Function properties for 'saxpy':
info    : used 10 registers, used 0 barriers, 0 stack, 0 bytes smem, 552 bytes cmem[0], 0 bytes lmem
info    : Function properties for 'poke':
info    : used 8 registers, used 0 barriers, 16 stack, 0 bytes smem, 536 bytes cmem[0], 24 bytes lmem`

func TestParsePtxasInfo(t *testing.T) {
	got := ParsePtxasInfo(sampleLog)
	want := []PtxasStats{
		{Function: "saxpy", Registers: 10, ConstBytes: 384},
		{Function: "_Z5heavyPfi", Registers: 32, StackFrame: 96, SpillStores: 48, SpillLoads: 40, SharedBytes: 2048, ConstBytes: 364, LocalBytes: 136},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d functions %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("function %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	got13 := ParsePtxasInfo(cuda13Log)
	want13 := []PtxasStats{
		{Function: "saxpy", Registers: 10, ConstBytes: 552},
		{Function: "poke", Registers: 8, StackFrame: 16, ConstBytes: 536, LocalBytes: 24},
	}
	if fmt.Sprint(got13) != fmt.Sprint(want13) {
		t.Errorf("CUDA 13 log: got %+v, want %+v", got13, want13)
	}
	r := &LinkResult{InfoLog: sampleLog}
	if s, ok := r.Stats("_Z5heavyPfi"); !ok || s.Registers != 32 {
		t.Fatalf("Stats(_Z5heavyPfi) = %+v, %v", s, ok)
	}
	if s, ok := r.Stats(""); !ok || s.Function != "saxpy" {
		t.Fatalf("Stats(\"\") = %+v, %v; want the first function", s, ok)
	}
	if _, ok := r.Stats("missing"); ok {
		t.Fatal("Stats found a function the log does not mention")
	}
	if len(ParsePtxasInfo("ptxas fatal : Unresolved extern function 'f'")) != 0 {
		t.Fatal("an error log produced function stats")
	}
}

func FuzzParsePtxasInfo(f *testing.F) {
	f.Add(sampleLog)
	f.Add(cuda13Log)
	f.Add("ptxas info : Used 99999999999999999999 registers")
	f.Add("Function properties for \nUsed 1 registers")
	f.Fuzz(func(t *testing.T, log string) {
		for _, s := range ParsePtxasInfo(log) {
			if s.Function == "" || !strings.Contains(log, s.Function) {
				t.Fatalf("function %q not taken from the log", s.Function)
			}
			if s.Registers < 0 || s.StackFrame < 0 || s.SpillStores < 0 || s.SpillLoads < 0 || s.LocalBytes < 0 {
				t.Fatalf("negative figure in %+v", s)
			}
		}
	})
}

func FuzzParseArch(f *testing.F) {
	for _, s := range []string{"sm_90", "sm_90a", "compute_80", "sm_", "sm_1a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseArch(s)
		if err == nil && (v&0xffff < 30 || v&0xffff > 1299) {
			t.Fatalf("ParseArch(%q) = %d outside the compute capabilities", s, v)
		}
	})
}
