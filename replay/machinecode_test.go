package replay

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/record"
	"github.com/mneme-gpu/mneme/record/inject"
)

// hostMemory stands for the application's GPU while record/inject records.
type hostMemory map[uint64][]byte

func (hostMemory) Synchronize() error { return nil }
func (m hostMemory) CopyToHost(dst []byte, src uint64) error {
	b, ok := m[src]
	if !ok || len(b) != len(dst) {
		return errors.New("no such allocation")
	}
	copy(dst, b)
	return nil
}
func (hostMemory) Describe() (db.DeviceInfo, error) { return db.DeviceInfo{Arch: "sm_90"}, nil }
func (hostMemory) GlobalAddress(int, string) (uint64, uint64, error) {
	return 0, 0, errors.New("no variables")
}

// recordThroughDriver records one launch of kernel (its module image and
// arguments) through the driver-level recorder over 4 KiB of host memory
// at recordedAddr, holding 1s; launch changes that memory as the kernel
// would (nil: not at all). It returns the database folder.
func recordThroughDriver(t *testing.T, kernel string, image []byte, args [][]byte, launch func(hostMemory)) string {
	t.Helper()
	dir := t.TempDir()
	mem := hostMemory{recordedAddr: bytes.Repeat([]byte{1}, 4096)}
	rec, err := inject.New(record.Config{DB: dir, Log: &bytes.Buffer{}}, mem)
	if err != nil {
		t.Fatal(err)
	}
	rec.Alloc(0, recordedAddr, 4096)
	l := &inject.Launch{Kernel: kernel, Image: rec.Image(image), Grid: mneme.Dim3{X: 16, Y: 1, Z: 1}, Block: mneme.Dim3{X: 256, Y: 1, Z: 1}, Args: args}
	tok := rec.LaunchBegin(l)
	if launch != nil {
		launch(mem)
	}
	rec.LaunchEnd(tok, nil)
	return dir
}

// recordedAddr is where recordThroughDriver's allocation lives; its bytes
// little-endian are the kernels' pointer arguments below.
const recordedAddr = 0x7f3552800000

// A recording made through the driver (machine code only) loads without IR,
// runs its recorded code whatever the configuration asks, and refuses the
// settings that need IR, each alone.
func TestMachineCodeRecordingReplaysItsOwnCode(t *testing.T) {
	image := []byte("\x7fELF cubin stand-in")
	dir := recordThroughDriver(t, "_Z5scalePfi", image, [][]byte{{0, 0, 0x80, 0x52, 0x35, 0x7f, 0, 0}, {0, 16, 0, 0}},
		func(mem hostMemory) { mem[recordedAddr][0] = 2 })

	r, err := Load(dir, "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.IR != nil || r.IRPath != "" || !r.HasOriginal() || !bytes.Equal(r.DeviceCode, image) {
		t.Fatalf("IR %d bytes at %q, device code %q: want no IR and the recorded image", len(r.IR), r.IRPath, r.DeviceCode)
	}
	cfg := r.Resolve(mneme.Config{Block: mneme.Dim3{X: 128, Y: 1, Z: 1}})
	if !cfg.Original || cfg.Block.X != 128 || cfg.Grid.X != 16 {
		t.Errorf("resolved %+v: want the original code with the asked block and the recorded grid", cfg)
	}
	if err := r.MachineCodeCheck(cfg); err != nil {
		t.Errorf("a geometry change was refused: %v", err)
	}
	for name, c := range map[string]mneme.Config{
		"specialize":      {Specialize: true},
		"specialize dims": {SpecializeDims: true},
		"launch bounds":   {SetLaunchBounds: true, MaxThreads: 256, MinBlocksPerSM: 1},
	} {
		if err := r.MachineCodeCheck(r.Resolve(c)); err == nil {
			t.Errorf("%s: accepted for a kernel without IR", name)
		}
	}
}

func TestEmbeddedPTX(t *testing.T) {
	fatbin, err := os.ReadFile("testdata/nvcc-vecadd.nv_fatbin")
	if err != nil {
		t.Fatal(err)
	}
	const vadd = "_Z4vaddPKfS0_Pfif"
	ptx, err := EmbeddedPTX(fatbin, vadd, 90)
	if err != nil || !bytes.Contains(ptx, []byte(".entry "+vadd)) {
		t.Fatalf("sm_90: %v", err)
	}
	if _, err := EmbeddedPTX(fatbin, vadd, 100); err != nil {
		t.Errorf("sm_100 (compute_90 PTX JIT-compiled): %v", err)
	}
	for name, c := range map[string]struct {
		image  []byte
		kernel string
		arch   int
		want   string
	}{
		"unknown kernel":   {fatbin, "_Z5otherv", 90, "_Z5otherv"},
		"older GPU":        {fatbin, vadd, 80, "sm_80"},
		"cubin":            {[]byte("\x7fELF\x02\x01\x01"), vadd, 90, "cubin"},
		"truncated fatbin": {fatbin[:100], vadd, 90, "truncated"},
	} {
		if _, err := EmbeddedPTX(c.image, c.kernel, c.arch); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %q", name, err, c.want)
		}
	}
	text := []byte("//\n.version 9.0\n.target sm_90\n.visible .entry k()\n{ ret; }\n\x00")
	if got, err := EmbeddedPTX(text, "k", 90); err != nil || !bytes.HasSuffix(got, []byte("}\n")) {
		t.Errorf("a PTX image: %q, %v", got, err)
	}
}

// Only a machine-code kernel's configuration that sets an assembler knob
// reassembles its PTX; each input changed alone.
func TestReassemblesOnlyMachineCodeWithKnobs(t *testing.T) {
	machine := &Recording{Kernel: &db.Kernel{Code: db.CodeMachine}}
	withIR := &Recording{Kernel: &db.Kernel{}}
	for _, c := range []struct {
		rec  *Recording
		cfg  mneme.Config
		want bool
	}{
		{machine, mneme.Config{PtxasOpt: 1}, true},
		{machine, mneme.Config{MaxRegisters: 32}, true},
		{machine, mneme.Config{}, false},
		{withIR, mneme.Config{PtxasOpt: 1}, false},
		{withIR, mneme.Config{MaxRegisters: 32}, false},
	} {
		if got := reassembles(c.rec, c.cfg); got != c.want {
			t.Errorf("machine code %v, %+v: %v, want %v", c.rec.Kernel.MachineCodeOnly(), c.cfg, got, c.want)
		}
	}
}

// A fat binary whose PTX is stored uncompressed (".version" in its first
// bytes) is still read as a fat binary: its PTX entry is what comes back.
func TestEmbeddedPTXOfAnUncompressedFatbin(t *testing.T) {
	ptx := []byte("//\n.version 9.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{ ret; }\n")
	for len(ptx)%8 != 0 {
		ptx = append(ptx, 0)
	}
	le := binary.LittleEndian
	entry := make([]byte, 64)
	le.PutUint16(entry[0:], 1)                // PTX
	le.PutUint32(entry[4:], 64)               // header size
	le.PutUint64(entry[8:], uint64(len(ptx))) // payload size
	le.PutUint16(entry[24:], 0)               // minor
	le.PutUint16(entry[26:], 9)               // major
	le.PutUint32(entry[28:], 90)              // compute_90
	fatbin := make([]byte, 16)
	le.PutUint32(fatbin[0:], 0xBA55ED50)
	le.PutUint16(fatbin[4:], 1)
	le.PutUint16(fatbin[6:], 16)
	le.PutUint64(fatbin[8:], uint64(len(entry)+len(ptx)))
	fatbin = append(append(fatbin, entry...), ptx...)
	got, err := EmbeddedPTX(fatbin, "k", 90)
	if err != nil || !bytes.Equal(got, bytes.TrimRight(ptx, "\x00")) {
		t.Errorf("got %q, %v; want the PTX entry alone", got, err)
	}
}

// An assembler knob on a machine-code kernel resolves to a reassembly of its
// PTX, a configuration Validate and MachineCodeCheck accept (it was resolved
// as the recorded code, which refuses compile knobs: every such trial was
// invalid_config); without a knob it stays the recorded code. Each knob
// alone, and fp_contract, which the driver's assembler lacks, is refused.
func TestMachineCodeKnobsResolveToReassembly(t *testing.T) {
	r := &Recording{Kernel: &db.Kernel{Code: db.CodeMachine, KernelName: "_Z4vaddPKfS0_Pfif"},
		Instance: &db.Instance{GridDims: mneme.Dim3{X: 16, Y: 1, Z: 1}, BlockDims: mneme.Dim3{X: 256, Y: 1, Z: 1}}}
	for name, c := range map[string]struct {
		cfg      mneme.Config
		original bool
	}{
		"no knob":           {mneme.Config{}, true},
		"ptxas level":       {mneme.Config{PtxasOpt: 1}, false},
		"register cap":      {mneme.Config{MaxRegisters: 32}, false},
		"both":              {mneme.Config{PtxasOpt: 3, MaxRegisters: 64}, false},
		"geometry, no knob": {mneme.Config{Block: mneme.Dim3{X: 128, Y: 1, Z: 1}}, true},
	} {
		cfg := r.Resolve(c.cfg)
		if cfg.Original != c.original {
			t.Errorf("%s: Original %v, want %v", name, cfg.Original, c.original)
		}
		if reassembles(r, cfg) == c.original {
			t.Errorf("%s: reassembles %v, want %v", name, !c.original, !c.original)
		}
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: Validate: %v", name, err)
		}
		if err := r.MachineCodeCheck(cfg); err != nil {
			t.Errorf("%s: MachineCodeCheck: %v", name, err)
		}
	}
	if err := r.MachineCodeCheck(r.Resolve(mneme.Config{FPContract: "off"})); err == nil || !strings.Contains(err.Error(), "fp_contract") {
		t.Errorf("fp_contract on machine code: %v, want a refusal naming it", err)
	}
	withIR := &Recording{Kernel: &db.Kernel{KernelName: "k"}, Instance: r.Instance}
	if withIR.Resolve(mneme.Config{}).Original {
		t.Error("a kernel with IR resolved to its recorded code")
	}
}

// A tuner's compile step on a configuration with an assembler knob checks
// that the image embeds the kernel's PTX and leaves the assembly to the
// run (it compiled IR there is none of: every such trial was a
// compile_error); an image without PTX is a compile error.
func TestCompileOfAReassembly(t *testing.T) {
	fatbin, err := os.ReadFile("testdata/nvcc-vecadd.nv_fatbin")
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		image []byte
		want  mneme.Status
	}{
		"fat binary with PTX": {fatbin, mneme.StatusVerified},
		"cubin":               {[]byte("\x7fELF\x02\x01\x01 cubin stand-in"), mneme.StatusCompileError},
	} {
		dir := recordThroughDriver(t, "_Z4vaddPKfS0_Pfif", c.image, [][]byte{{0, 0, 0x80, 0x52, 0x35, 0x7f, 0, 0}}, nil)
		s, err := Open(Options{DB: dir, CompileOnly: true})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		res, err := s.Compile(mneme.Config{MaxRegisters: 32})
		if err != nil || res.Status != c.want {
			t.Errorf("%s: %s (%s), %v; want %s", name, res.Status, res.Error, err, c.want)
		}
		if res, _ := s.Compile(mneme.Config{}); res.Status != mneme.StatusVerified {
			t.Errorf("%s: the recorded code: %s (%s)", name, res.Status, res.Error)
		}
		s.Close()
	}
}
