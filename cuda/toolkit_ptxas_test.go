package cuda

import (
	"os"
	"strings"
	"testing"
)

// add1PTX adds 1 to a float in place: a kernel both assemblers accept.
const add1PTX = `.version 7.8
.target sm_90
.address_size 64
.visible .entry add1(.param .u64 p) {
  .reg .b64 %rd<3>; .reg .f32 %f<3>;
  ld.param.u64 %rd1, [p];
  cvta.to.global.u64 %rd2, %rd1;
  ld.global.f32 %f1, [%rd2];
  add.f32 %f2, %f1, 0f3F800000;
  st.global.f32 [%rd2], %f2;
  ret;
}
`

// checkAdd1Cubin checks an assembled add1PTX: an ELF cubin, ptxas's
// register count in the log, and the options in ptxas's spelling.
func checkAdd1Cubin(t *testing.T, res *LinkResult, wantOptions string) {
	t.Helper()
	if len(res.Cubin) < 4 || string(res.Cubin[1:4]) != "ELF" {
		t.Fatalf("not an ELF cubin: % x", res.Cubin[:min(8, len(res.Cubin))])
	}
	st, ok := res.Stats("add1")
	if !ok || st.Registers <= 0 {
		t.Errorf("no register count for add1 in the log:\n%s", res.InfoLog)
	}
	if got := strings.Join(res.Options, " "); got != wantOptions {
		t.Errorf("options %q, want %q", got, wantOptions)
	}
}

// The toolkit's ptxas needs no GPU, only libnvJitLink: the test runs wherever
// the library is found (MNEME_NVJITLINK or a CUDA installation).
func TestToolkitLinkPTX(t *testing.T) {
	if _, err := ToolkitPTXAS(); err != nil {
		if os.Getenv("MNEME_GPU_REQUIRED") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	ptx := []byte(add1PTX)
	res, err := ToolkitLinkPTX(ptx, "add1.ptx", JITOptions{OptLevel: -1, Arch: "sm_90", MaxRegisters: 32})
	if err != nil {
		t.Fatal(err)
	}
	checkAdd1Cubin(t, res, "toolkit-ptxas -arch=sm_90 -maxrregcount=32")
	// Every ptxas level links (nvJitLink's own -O accepts only 0 and 3).
	for level := 0; level <= 4; level++ {
		if _, err := ToolkitLinkPTX(ptx, "add1.ptx", JITOptions{OptLevel: level, Arch: "sm_90"}); err != nil {
			t.Errorf("ptxas level %d: %v", level, err)
		}
	}
	if _, err := ToolkitLinkPTX([]byte(".version 7.8\n.target sm_90\nnot ptx"), "bad.ptx", JITOptions{OptLevel: -1, Arch: "sm_90"}); err == nil {
		t.Error("malformed PTX linked")
	}
}

// The toolkit's ptxas program needs no GPU either: the test runs wherever
// it is found (MNEME_PTXAS_BIN, a CUDA installation or PATH).
func TestPtxasAssemble(t *testing.T) {
	if _, _, err := PtxasProgram(); err != nil {
		if os.Getenv("MNEME_GPU_REQUIRED") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	ptx := []byte(add1PTX)
	res, err := PtxasAssemble(ptx, "add1", JITOptions{OptLevel: -1, Arch: "sm_90", MaxRegisters: 32})
	if err != nil {
		t.Fatal(err)
	}
	checkAdd1Cubin(t, res, "ptxas -m64 -O3 --gpu-name sm_90 --maxrregcount=32")
	if _, err := PtxasAssemble([]byte(".version 7.8\n.target sm_90\nnot ptx"), "bad", JITOptions{OptLevel: -1, Arch: "sm_90"}); err == nil {
		t.Error("malformed PTX assembled")
	} else if le, ok := err.(*LinkError); !ok || le.Log == "" {
		t.Errorf("the error carries no ptxas log: %v", err)
	}
}
