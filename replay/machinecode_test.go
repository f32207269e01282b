package replay

import (
	"bytes"
	"errors"
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

// A recording made through the driver (machine code only) loads without IR,
// runs its recorded code whatever the configuration asks, and refuses the
// settings that need IR, each alone.
func TestMachineCodeRecordingReplaysItsOwnCode(t *testing.T) {
	dir := t.TempDir()
	const addr = 0x7f3552800000
	mem := hostMemory{addr: bytes.Repeat([]byte{1}, 4096)}
	rec, err := inject.New(record.Config{DB: dir, Log: &bytes.Buffer{}}, mem)
	if err != nil {
		t.Fatal(err)
	}
	rec.Alloc(addr, 4096)
	image := []byte("\x7fELF cubin stand-in")
	l := &inject.Launch{Kernel: "_Z5scalePfi", Image: rec.Image(image), Grid: mneme.Dim3{X: 16, Y: 1, Z: 1}, Block: mneme.Dim3{X: 256, Y: 1, Z: 1},
		Args: [][]byte{{0, 0, 0x80, 0x52, 0x35, 0x7f, 0, 0}, {0, 16, 0, 0}}}
	tok := rec.LaunchBegin(l)
	mem[addr][0] = 2
	rec.LaunchEnd(tok, nil)

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
