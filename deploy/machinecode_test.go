package deploy

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme"
)

// fakeAssembler hands out function handles and refuses what it is told to.
type fakeAssembler struct {
	assembled []string // "kernel image opt regs" per call
	fail      error
	maxThread uint64 // Fits refuses more threads; 0: no limit
	fits      []uint64
}

func (a *fakeAssembler) Assemble(image int, kernel string, opt, regs int) (uint64, error) {
	a.assembled = append(a.assembled, strings.Join([]string{kernel, itoa(image), itoa(opt), itoa(regs)}, " "))
	if a.fail != nil {
		return 0, a.fail
	}
	return 0xf00, nil
}

func (a *fakeAssembler) Fits(fn, threads uint64, shared uint32) error {
	a.fits = append(a.fits, fn)
	if a.maxThread != 0 && threads > a.maxThread {
		return errors.New("too many threads")
	}
	return nil
}

func itoa(i int) string { return strconv.Itoa(i) }

var (
	recGrid  = mneme.Dim3{X: 4096, Y: 1, Z: 1}
	recBlock = mneme.Dim3{X: 256, Y: 1, Z: 1}
)

// geometryPlan is what tuning a machine-code kernel's block exports: the
// application's code, a tuned block, the recorded launch, the default
// pipeline it never used.
func geometryPlan() *Plan {
	return &Plan{Kernel: "_Z6vecaddPKfS0_Pfi", Source: "tuned.json", Original: true,
		Config:     mneme.Config{Passes: mneme.DefaultPipeline, CodegenOpt: 3},
		TunedBlock: mneme.Dim3{X: 128, Y: 1, Z: 1}, RecordedBlock: recBlock, RecordedGrid: recGrid}
}

func TestMachineCodeGeometryOnlyForTheRecordedBlock(t *testing.T) {
	asm := &fakeAssembler{}
	var warned []string
	r := &MachineCodeRuntime{Plans: Plans{"_Z6vecaddPKfS0_Pfi": geometryPlan()}, Asm: asm, Warn: func(m string) { warned = append(warned, m) }}
	got := r.Launch("_Z6vecaddPKfS0_Pfi", 0, 0xa11, recGrid, recBlock, 0)
	if got.Fn != 0 || got.Block.X != 128 || got.Grid.X != 8192 || !got.Changed(recGrid, recBlock) {
		t.Errorf("recorded block: %+v, want the application's function at block 128, grid 8192", got)
	}
	if len(asm.fits) != 1 || asm.fits[0] != 0xa11 {
		t.Errorf("Fits asked of %x, want the application's function once", asm.fits)
	}
	other := mneme.Dim3{X: 64, Y: 1, Z: 1}
	if got := r.Launch("_Z6vecaddPKfS0_Pfi", 0, 0xa11, recGrid, other, 0); got.Changed(recGrid, other) {
		t.Errorf("another block: %+v, want the launch unchanged", got)
	}
	if got := r.Launch("_Z5otherv", 0, 0xb22, recGrid, recBlock, 0); got.Changed(recGrid, recBlock) {
		t.Errorf("a kernel without a plan: %+v, want it unchanged", got)
	}
	if len(asm.assembled) != 0 || len(warned) != 0 {
		t.Errorf("assembled %v, warned %v: want neither", asm.assembled, warned)
	}
	st := r.Stats()
	if len(st) != 1 || st[0].Launches != 2 || st[0].Tuned != 1 || st[0].Disabled {
		t.Errorf("stats %+v, want the planned kernel alone: 2 launches, 1 tuned", st)
	}
}

func TestMachineCodeReassemblesOncePerImage(t *testing.T) {
	asm := &fakeAssembler{}
	p := geometryPlan()
	p.Original, p.TunedBlock = false, mneme.Dim3{}
	p.Config.MaxRegisters, p.Config.PtxasOpt = 32, 2
	r := &MachineCodeRuntime{Plans: Plans{p.Kernel: p}, Asm: asm}
	for range 3 {
		got := r.Launch(p.Kernel, 4, 0xa11, recGrid, recBlock, 0)
		if got.Fn != 0xf00 || got.Block != recBlock || got.Grid != recGrid {
			t.Fatalf("%+v, want the reassembled function at the application's geometry", got)
		}
	}
	r.Launch(p.Kernel, 5, 0xa12, recGrid, recBlock, 0)
	if want := []string{p.Kernel + " 4 2 32", p.Kernel + " 5 2 32"}; strings.Join(asm.assembled, ",") != strings.Join(want, ",") {
		t.Errorf("assembled %q, want %q", asm.assembled, want)
	}
	if asm.fits[0] != 0xf00 {
		t.Errorf("Fits asked of %x, want the reassembled function", asm.fits[0])
	}
	// Each knob alone reassembles; the application's code never does.
	for name, c := range map[string]struct {
		opt, regs int
		original  bool
		want      bool
	}{"level": {1, 0, false, true}, "cap": {0, 64, false, true}, "none": {0, 0, false, false}, "original": {1, 32, true, false}} {
		q := &Plan{Original: c.original, Config: mneme.Config{PtxasOpt: c.opt, MaxRegisters: c.regs}}
		if q.reassembles() != c.want {
			t.Errorf("%s: reassembles %v, want %v", name, !c.want, c.want)
		}
	}
}

func TestMachineCodeFailuresRunTheApplicationsCode(t *testing.T) {
	p := geometryPlan()
	p.Original = false
	p.Config.MaxRegisters = 32
	asm := &fakeAssembler{fail: errors.New("ptxas fatal")}
	var warned []string
	r := &MachineCodeRuntime{Plans: Plans{p.Kernel: p}, Asm: asm, Warn: func(m string) { warned = append(warned, m) }}
	for range 2 {
		if got := r.Launch(p.Kernel, 0, 0xa11, recGrid, recBlock, 0); got.Changed(recGrid, recBlock) {
			t.Errorf("assembly failed: %+v, want the launch unchanged", got)
		}
	}
	if len(asm.assembled) != 1 || len(warned) != 1 || !strings.Contains(warned[0], "ptxas fatal") {
		t.Errorf("assembled %d times, warned %q: want once each, naming the failure", len(asm.assembled), warned)
	}
	if st := r.Stats(); len(st) != 1 || !st[0].Disabled || st[0].Tuned != 0 || st[0].Launches != 2 {
		t.Errorf("stats %+v", st)
	}

	// A tuned block the code cannot take: that launch runs as launched,
	// warned once; the plan stays for launches it fits.
	asm = &fakeAssembler{maxThread: 64}
	warned = nil
	r = &MachineCodeRuntime{Plans: Plans{"_Z6vecaddPKfS0_Pfi": geometryPlan()}, Asm: asm, Warn: func(m string) { warned = append(warned, m) }}
	for range 2 {
		if got := r.Launch("_Z6vecaddPKfS0_Pfi", 0, 0xa11, recGrid, recBlock, 0); got.Changed(recGrid, recBlock) {
			t.Errorf("a block that does not fit: %+v, want the launch unchanged", got)
		}
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "too many threads") {
		t.Errorf("warned %q, want once", warned)
	}
}

// An entry of an IR tuning is not applied to machine code, each reason alone;
// the defaults a machine-code tuning exports are.
func TestMachineCodeRefusesWhatNeedsIR(t *testing.T) {
	for name, c := range map[string]struct {
		edit func(*Plan)
		want string
	}{
		"specialize":               {func(p *Plan) { p.Config.Specialize = true }, "folds"},
		"specialize args":          {func(p *Plan) { p.Config.SpecializeArgs = []int{1} }, "folds"},
		"specialize dims":          {func(p *Plan) { p.Config.SpecializeDims = true }, "folds"},
		"launch bounds":            {func(p *Plan) { p.Config.SetLaunchBounds = true }, "launch bounds"},
		"fp_contract":              {func(p *Plan) { p.Config.FPContract = "off" }, "fp_contract"},
		"pipeline":                 {func(p *Plan) { p.Original = false; p.Config.Passes = "default<O1>" }, "pipeline"},
		"codegen level":            {func(p *Plan) { p.Original = false; p.Config.CodegenOpt = 1 }, "codegen level"},
		"classes":                  {func(p *Plan) { p.Classes = []*ClassPlan{{}} }, "classes"},
		"as exported":              {func(*Plan) {}, ""},
		"original, other pipeline": {func(p *Plan) { p.Config.Passes = "default<O1>" }, ""},
	} {
		p := geometryPlan()
		c.edit(p)
		got := usableOnMachineCode(p)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", name, got, c.want)
		}
		var warned []string
		r := &MachineCodeRuntime{Plans: Plans{p.Kernel: p}, Asm: &fakeAssembler{}, Warn: func(m string) { warned = append(warned, m) }}
		changed := r.Launch(p.Kernel, 0, 0xa11, recGrid, recBlock, 0).Changed(recGrid, recBlock)
		if changed == (c.want != "") || len(warned) != map[bool]int{true: 1, false: 0}[c.want != ""] {
			t.Errorf("%s: changed %v, warned %q", name, changed, warned)
		}
	}
}

func TestReassemblyPTXRefusesSharedVariables(t *testing.T) {
	const head = "//\n.version 9.0\n.target sm_90\n.address_size 64\n"
	const entry = ".visible .entry k()\n{\n\tret;\n}\n"
	ok := head + ".global .align 1 .b8 $str[2] = {104, 0};\n.const .align 4 .b8 __cudart_i2opi_f[4] = {1, 2, 3, 4};\n" + entry
	if ptx, err := ReassemblyPTX([]byte(ok), "k", 90); err != nil || !strings.Contains(string(ptx), ".entry k") {
		t.Errorf("compiler tables only: %v", err)
	}
	for name, decl := range map[string]string{
		"__device__":        ".visible .global .align 4 .f32 scale_factor;\n",
		"static __device__": ".global .align 4 .u32 _ZL5table[8];\n",
		"__constant__":      ".visible .const .align 4 .u32 coeff;\n",
		"extern __device__": ".extern .global .align 4 .u32 other;\n",
	} {
		_, err := ReassemblyPTX([]byte(head+decl+entry), "k", 90)
		if err == nil || !strings.Contains(err.Error(), "device variables") {
			t.Errorf("%s: %v, want a refusal naming the variables", name, err)
		}
	}
	if _, err := ReassemblyPTX([]byte("\x7fELF\x02\x01\x01 cubin"), "k", 90); err == nil {
		t.Error("a cubin (no PTX) was accepted")
	}
}

// deploy check on an nvcc binary: each entry's status for machine code.
func TestCheckMachineCode(t *testing.T) {
	block := geometryPlan()
	reg := geometryPlan()
	reg.Kernel, reg.Original, reg.TunedBlock, reg.Config.MaxRegisters = "_Z3regv", false, mneme.Dim3{}, 32
	own := geometryPlan()
	own.Kernel, own.TunedBlock = "_Z3ownv", mneme.Dim3{}
	ir := geometryPlan()
	ir.Kernel, ir.Config.Specialize = "_Z2irv", true
	gone := geometryPlan()
	gone.Kernel = "_Z6vecaddPKfS0_Pfj"
	gone.TunedGPU = "NVIDIA H200"
	plans := Plans{block.Kernel: block, reg.Kernel: reg, own.Kernel: own, ir.Kernel: ir, gone.Kernel: gone}
	rep := CheckMachineCode(plans, []string{"_Z6vecaddPKfS0_Pfi", "_Z3regv", "_Z3ownv", "_Z2irv"}, "NVIDIA H100 80GB HBM3")
	want := map[string][2]string{
		block.Kernel: {StatusDeployed, "block 128,1,1 for launches of block 256,1,1"},
		reg.Kernel:   {StatusDeployed, "PTX reassembled (ptxas_opt 0, max_registers 32)"},
		own.Kernel:   {StatusOriginal, ""},
		ir.Kernel:    {StatusInvalid, "not applied to machine code: it folds arguments or dimensions, which needs IR"},
		gone.Kernel:  {StatusUnknown, "did you mean _Z6vecaddPKfS0_Pfi?; tuned on NVIDIA H200, this GPU is NVIDIA H100 80GB HBM3"},
	}
	if len(rep.Rows) != len(want) || rep.Matched != 3 {
		t.Fatalf("%d rows, %d matched: %+v", len(rep.Rows), rep.Matched, rep.Rows)
	}
	for _, r := range rep.Rows {
		if w := want[r.Kernel]; r.Status != w[0] || r.Note != w[1] {
			t.Errorf("%s: %s %q, want %s %q", r.Kernel, r.Status, r.Note, w[0], w[1])
		}
	}
}

// A tuned launch that failed turns the kernel's deployment off, warned once.
func TestMachineCodeFailedLaunchTurnsTheKernelOff(t *testing.T) {
	var warned []string
	r := &MachineCodeRuntime{Plans: Plans{"_Z6vecaddPKfS0_Pfi": geometryPlan()}, Asm: &fakeAssembler{}, Warn: func(m string) { warned = append(warned, m) }}
	if !r.Launch("_Z6vecaddPKfS0_Pfi", 0, 0xa11, recGrid, recBlock, 0).Changed(recGrid, recBlock) {
		t.Fatal("the first launch was not tuned")
	}
	r.Failed("_Z5otherv", errors.New("CUDA error 701"))
	if len(warned) != 0 {
		t.Errorf("a failure of another kernel warned: %q", warned)
	}
	r.Failed("_Z6vecaddPKfS0_Pfi", errors.New("CUDA error 701"))
	r.Failed("_Z6vecaddPKfS0_Pfi", errors.New("CUDA error 701"))
	if got := r.Launch("_Z6vecaddPKfS0_Pfi", 0, 0xa11, recGrid, recBlock, 0); got.Changed(recGrid, recBlock) {
		t.Errorf("after a failed tuned launch: %+v, want the application's", got)
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "CUDA error 701") {
		t.Errorf("warned %q, want once naming the error", warned)
	}
}
