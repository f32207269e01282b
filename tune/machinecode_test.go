package tune

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/internal/cubintest"
)

// A kernel recorded as machine code only tunes its block shape and nothing
// that needs IR; the same preset for a kernel with IR keeps those knobs.
func TestMachineCodePresetsKeepOnlyTheLaunch(t *testing.T) {
	withIR := vecadd
	machine := vecadd
	machine.MachineCode = true
	s, err := Preset("launch", withIR, mneme.DeviceLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Param(ParamLaunchBounds); !ok {
		t.Fatal("the launch preset of a kernel with IR has no launch bounds")
	}
	for _, name := range []string{"quick", "standard", "launch", "full"} {
		s, err := Preset(name, machine, mneme.DeviceLimits{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, ok := s.Param(ParamBlockX); !ok {
			t.Errorf("%s: no block shapes for a machine-code kernel", name)
		}
		for _, p := range []string{ParamLaunchBounds, ParamPasses, ParamSpecialize, ParamSpecializeDims, ParamCodegenOpt} {
			if _, ok := s.Param(p); ok {
				t.Errorf("%s: %s offered for a kernel without IR", name, p)
			}
		}
	}
	if _, err := Preset("compiler", machine, mneme.DeviceLimits{}); err == nil || !strings.Contains(err.Error(), "--preset launch") {
		t.Errorf("compiler preset for machine code without PTX: %v", err)
	}
	// With PTX in the image, the assembler knobs join compiler and full.
	withPTX := machine
	withPTX.EmbeddedPTX = true
	for name, block := range map[string]bool{"compiler": false, "full": true} {
		s, err := Preset(name, withPTX, mneme.DeviceLimits{})
		if err != nil {
			t.Fatalf("%s with PTX: %v", name, err)
		}
		_, hasBlock := s.Param(ParamBlockX)
		_, regs := s.Param(ParamMaxRegisters)
		_, opt := s.Param(ParamPtxasOpt)
		if hasBlock != block || !regs || !opt {
			t.Errorf("%s with PTX: block %v (want %v), max registers %v, ptxas level %v", name, hasBlock, block, regs, opt)
		}
	}
	if s, _ := Preset("full", machine, mneme.DeviceLimits{}); s != nil {
		if _, ok := s.Param(ParamMaxRegisters); ok {
			t.Error("full offers assembler knobs for an image without PTX")
		}
	}
}

func TestEmbedsPTX(t *testing.T) {
	dir := t.TempDir()
	cubin := filepath.Join(dir, "cubin")
	if err := os.WriteFile(cubin, []byte("\x7fELF\x02\x01\x01 .version in a string"), 0o644); err != nil {
		t.Fatal(err)
	}
	ptx := filepath.Join(dir, "ptx")
	if err := os.WriteFile(ptx, []byte("//\n.version 9.0\n.target sm_90\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const fatbin = "testdata/nvcc-vecadd.nv_fatbin" // sm_90 cubins and compute_90 PTX
	for _, c := range []struct {
		path, arch string
		want       bool
	}{
		{fatbin, "sm_90", true},
		{fatbin, "sm_100", true},
		{fatbin, "sm_80", false},
		{cubin, "sm_90", false},
		{ptx, "sm_90", true},
		{filepath.Join(dir, "missing"), "sm_90", false},
	} {
		if got := embedsPTX(c.path, c.arch); got != c.want {
			t.Errorf("%s on %s: %v, want %v", filepath.Base(c.path), c.arch, got, c.want)
		}
	}
}

// dryRunMachineCode is a dry run of the launch preset on the test
// recording's kernel recorded as machine code only: the image code(kernel
// name) as its device code. It returns what the run printed.
func dryRunMachineCode(t *testing.T, code func(kernel string) []byte) string {
	t.Helper()
	dbDir, id := writeRunDB(t, func(dir string, k *db.Kernel) {
		image := code(k.KernelName)
		k.Code, k.Modules = db.CodeMachine, []string{}
		k.DeviceCode = db.DeviceCodeFileName(image)
		if err := os.WriteFile(filepath.Join(dir, k.DeviceCode), image, 0o644); err != nil {
			t.Fatal(err)
		}
	})
	ro, stdout, _ := runOptions(t)
	ro.Options.DB, ro.Options.Instance, ro.Options.Preset = dbDir, id, "launch"
	ro.Factory, ro.DryRun = nil, true
	if err := Run(context.Background(), ro); err != nil {
		t.Fatal(err)
	}
	return stdout.String()
}

// Its launch safety is aggressive with verification, whatever was asked,
// and the run says why.
func TestMachineCodeKernelSearchesBlocksAggressively(t *testing.T) {
	stdout := dryRunMachineCode(t, func(string) []byte { return []byte("cubin") })
	for _, want := range []string{"launch safety aggressive", "machine code only"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("dry run lacks %q:\n%s", want, stdout)
		}
	}
}

// A machine-code kernel's launch bound, as ptxas wrote it into its cubin
// (EIATTR_MAX_THREADS), limits the blocks searched as the IR's would.
func TestMachineCodeKernelKeepsItsLaunchBound(t *testing.T) {
	cubin := func(kernel string, bound uint32) []byte {
		info := []byte{4, 0x05, 12, 0}
		for _, d := range []uint32{bound, 1, 1} {
			info = binary.LittleEndian.AppendUint32(info, d)
		}
		return cubintest.Build([]cubintest.Section{{Name: ".nv.info." + kernel, Type: 0x70000000, Data: info}, {Name: ".text." + kernel, Type: 1, Data: make([]byte, 16)}},
			[]cubintest.Symbol{{Name: kernel, Bind: 1, Type: 2, Section: 5, Size: 16}})
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "code.cubin")
	if err := os.WriteFile(path, cubin("_Z6vecaddPfPKfif", 128), 0o644); err != nil {
		t.Fatal(err)
	}
	if n := machineCodeLaunchBound(path, "sm_90", "_Z6vecaddPfPKfif"); n != 128 {
		t.Errorf("bound %d, want 128", n)
	}
	if n := machineCodeLaunchBound(path, "sm_90", "_Z5otherv"); n != 0 {
		t.Errorf("another kernel's bound %d, want 0", n)
	}
	if n := machineCodeLaunchBound(filepath.Join(dir, "missing"), "sm_90", "_Z6vecaddPfPKfif"); n != 0 {
		t.Errorf("no file: bound %d, want 0", n)
	}

	stdout := dryRunMachineCode(t, func(kernel string) []byte { return cubin(kernel, 128) })
	if !strings.Contains(stdout, "at most 128 threads") {
		t.Errorf("dry run does not say the launch bound limits the blocks:\n%s", stdout)
	}
}
