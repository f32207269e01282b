package inject

import (
	"bytes"
	"debug/elf"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme/nvbin"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/record"
)

// fakeDevice is device memory as a map of allocations; vars are the device
// variables of every loaded module, by name.
type fakeDevice struct {
	captured uintptr // a stream being captured into a graph, if not 0
	mem      map[uint64][]byte
	vars     map[string]uint64
	syncErr  error
	syncs    int
}

func (f *fakeDevice) GlobalAddress(image int, name string) (uint64, uint64, error) {
	a, ok := f.vars[name]
	if !ok {
		return 0, 0, errors.New("CUDA_ERROR_NOT_FOUND")
	}
	return a, uint64(len(f.mem[a])), nil
}

func (f *fakeDevice) Synchronize() error { f.syncs++; return f.syncErr }
func (f *fakeDevice) Capturing(stream uintptr) bool {
	return f.captured != 0 && stream == f.captured
}
func (f *fakeDevice) CopyToHost(dst []byte, src uint64) error {
	for a, b := range f.mem {
		if src >= a && src+uint64(len(dst)) <= a+uint64(len(b)) {
			copy(dst, b[src-a:])
			return nil
		}
	}
	return errors.New("no such allocation")
}
func (f *fakeDevice) Describe() (db.DeviceInfo, error) {
	return db.DeviceInfo{Name: "fake", Arch: "sm_90", ComputeCapability: "9.0"}, nil
}

const (
	addrA = 0x7f3552800000 // inside a 64 MiB block, as the driver places them
	addrB = 0x7f3552c00000
	ctxA  = 0x55a0c0de0000 // the application's context (a CUcontext)
)

func newTest(t *testing.T, mutate func(*record.Config)) (*Recorder, *fakeDevice, string) {
	t.Helper()
	dir := t.TempDir()
	cfg := record.Config{DB: dir, Log: &bytes.Buffer{}}
	if mutate != nil {
		mutate(&cfg)
	}
	dev := &fakeDevice{mem: map[uint64][]byte{
		addrA: bytes.Repeat([]byte{1}, 4096),
		addrB: bytes.Repeat([]byte{2}, 8192),
	}}
	r, err := New(cfg, dev)
	if err != nil {
		t.Fatal(err)
	}
	r.Alloc(ctxA, addrA, 4096)
	r.Alloc(ctxA, addrB, 8192)
	return r, dev, dir
}

func launch(image int, scalar byte) *Launch {
	ptr := []byte{0, 0, 0x80, 0x52, 0x35, 0x7f, 0, 0} // addrA, little-endian
	return &Launch{Context: ctxA, Kernel: "_Z4vaddPfi", Image: image, Grid: mneme.Dim3{X: 4, Y: 1, Z: 1}, Block: mneme.Dim3{X: 256, Y: 1, Z: 1},
		Args: [][]byte{ptr, {scalar, 0, 0, 0}}}
}

// record runs one launch through the recorder, the kernel writing 9s into
// allocation A as the driver would between the two callbacks.
func recordOne(t *testing.T, r *Recorder, dev *fakeDevice, l *Launch) int {
	t.Helper()
	tok := r.LaunchBegin(l)
	if tok != 0 {
		copy(dev.mem[addrA], bytes.Repeat([]byte{9}, 100))
		r.LaunchEnd(tok, nil)
	}
	return tok
}

// firstInstance reads the database's first kernel's first instance: its
// prologue and epilogue, read back as replay reads them (references to
// other snapshot files resolved).
func firstInstance(t *testing.T, dir string) (pro, epi *db.Snapshot) {
	t.Helper()
	d, err := db.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	k := d.Kernels[0]
	inst := k.Instances[k.InstanceIDs()[0]]
	if pro, err = d.ReadPrologue(k, inst); err != nil {
		t.Fatal(err)
	}
	if epi, err = d.ReadEpilogue(k, inst); err != nil {
		t.Fatal(err)
	}
	return pro, epi
}

func TestRecordsALaunchAsMachineCode(t *testing.T) {
	r, dev, dir := newTest(t, nil)
	image := []byte("\x7fELF pretend cubin")
	id := r.Image(image)
	if tok := recordOne(t, r, dev, launch(id, 5)); tok == 0 {
		t.Fatal("the first launch of a selected kernel was not recorded")
	}
	d, err := db.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Kernels) != 1 {
		t.Fatalf("%d kernels in the database", len(d.Kernels))
	}
	k := d.Kernels[0]
	if !k.MachineCodeOnly() || len(k.Modules) != 0 {
		t.Errorf("Code %q, Modules %v: want machine code only, no IR", k.Code, k.Modules)
	}
	code, err := os.ReadFile(filepath.Join(dir, k.DeviceCode))
	if err != nil || !bytes.Equal(code, image) {
		t.Errorf("DeviceCode %s holds %q (%v), want the loaded image", k.DeviceCode, code, err)
	}
	base, _ := k.ParseVAddr()
	if base != addrA/AddressAlign*AddressAlign || base+k.VASize < addrB+8192 || base%AddressAlign != 0 || k.VASize%AddressAlign != 0 {
		t.Errorf("range 0x%x+%d does not cover the allocations on 64 MiB boundaries", base, k.VASize)
	}
	if got := k.ArgSizes; len(got) != 2 || got[0] != 8 || got[1] != 4 {
		t.Errorf("ArgSizes %v", got)
	}
	inst := k.Instances[k.InstanceIDs()[0]]
	pro, err := d.ReadPrologue(k, inst)
	if err != nil {
		t.Fatal(err)
	}
	epi, err := d.ReadEpilogue(k, inst)
	if err != nil {
		t.Fatal(err)
	}
	if len(pro.Blobs) != 2 || pro.Blobs[0].Addr != addrA || pro.Blobs[0].Data[0] != 1 || epi.Blobs[0].Data[0] != 9 || epi.Blobs[1].Data[0] != 2 {
		t.Errorf("snapshots do not hold the memory before and after the launch")
	}
	if !bytes.Equal(pro.Args[1], []byte{5, 0, 0, 0}) {
		t.Errorf("argument bytes %x", pro.Args[1])
	}
	st := r.Status()
	if st.InstancesRecorded != 1 || st.KernelsRecorded != 1 || st.LaunchesSeen != 1 {
		t.Errorf("status %+v", st)
	}
}

func TestRepeatsAndNewInstances(t *testing.T) {
	r, dev, dir := newTest(t, func(c *record.Config) { c.MaxRecordings = 2 })
	id := r.Image([]byte("cubin"))
	if recordOne(t, r, dev, launch(id, 1)) == 0 {
		t.Fatal("first launch not recorded")
	}
	if recordOne(t, r, dev, launch(id, 1)) != 0 {
		t.Error("a repeat of a recorded instance was recorded again")
	}
	if recordOne(t, r, dev, launch(id, 2)) == 0 {
		t.Error("a launch differing only in a scalar was not a new instance")
	}
	if recordOne(t, r, dev, launch(id, 3)) != 0 {
		t.Error("a third instance was recorded past --max-recordings 2")
	}
	d, err := db.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	k := d.Kernels[0]
	occ := 0
	for _, inst := range k.Instances {
		occ += inst.Occurrences
	}
	if len(k.Instances) != 2 || occ != 3 {
		t.Errorf("%d instances with %d occurrences, want 2 and 3", len(k.Instances), occ)
	}
}

func TestSelection(t *testing.T) {
	t.Run("kernels", func(t *testing.T) {
		r, dev, _ := newTest(t, func(c *record.Config) { c.Kernels = regexp.MustCompile("other") })
		if r.Wants("_Z4vaddPfi") {
			t.Error("a kernel --kernels does not match is wanted")
		}
		if !r.Wants("_Z5otherv") {
			t.Error("a matching kernel is not wanted")
		}
		// Unwanted kernels are counted when asked about; wanted ones at
		// their first launch.
		if st := r.Status(); st.KernelsRegistered != 1 {
			t.Errorf("%d kernels seen, want 1", st.KernelsRegistered)
		}
		if recordOne(t, r, dev, launch(r.Image([]byte("cubin")), 1)) != 0 {
			t.Error("a kernel --kernels does not match was recorded")
		}
	})
	t.Run("skip", func(t *testing.T) {
		r, dev, _ := newTest(t, func(c *record.Config) { c.Skip = 1 })
		id := r.Image([]byte("cubin"))
		if recordOne(t, r, dev, launch(id, 1)) != 0 {
			t.Error("the first launch was recorded under --skip 1")
		}
		if recordOne(t, r, dev, launch(id, 1)) == 0 {
			t.Error("the second launch was not recorded under --skip 1")
		}
	})
}

func TestFreedAllocationsLeaveTheSnapshots(t *testing.T) {
	r, dev, dir := newTest(t, nil)
	r.Free(addrB)
	recordOne(t, r, dev, launch(r.Image([]byte("cubin")), 1))
	d, err := db.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	k := d.Kernels[0]
	pro, err := d.ReadPrologue(k, k.Instances[k.InstanceIDs()[0]])
	if err != nil {
		t.Fatal(err)
	}
	if len(pro.Blobs) != 1 || pro.Blobs[0].Addr != addrA {
		t.Errorf("prologue holds %d allocations, want only the live one", len(pro.Blobs))
	}
}

func TestWhatIsNotRecorded(t *testing.T) {
	t.Run("unknown module", func(t *testing.T) {
		r, dev, _ := newTest(t, nil)
		if recordOne(t, r, dev, launch(-1, 1)) != 0 {
			t.Fatal("a kernel of an unseen module was recorded")
		}
		if st := r.Status(); len(st.Errors) != 1 || !strings.Contains(st.Errors[0], "module it came from") {
			t.Errorf("errors %q", st.Errors)
		}
	})
	t.Run("failed launch", func(t *testing.T) {
		r, _, dir := newTest(t, nil)
		tok := r.LaunchBegin(launch(r.Image([]byte("cubin")), 1))
		r.LaunchEnd(tok, errors.New("CUDA_ERROR_INVALID_VALUE"))
		if st := r.Status(); st.InstancesRecorded != 0 || len(st.Errors) != 1 {
			t.Errorf("status %+v", st)
		}
		if m, _ := filepath.Glob(filepath.Join(dir, "*.json")); len(m) != 0 {
			t.Errorf("kernel files written for a failed launch: %v", m)
		}
	})
	t.Run("device fault", func(t *testing.T) {
		r, dev, _ := newTest(t, nil)
		dev.syncErr = errors.New("CUDA_ERROR_ILLEGAL_ADDRESS")
		if recordOne(t, r, dev, launch(r.Image([]byte("cubin")), 1)) != 0 {
			t.Error("a launch whose prologue could not be taken was recorded")
		}
	})
	t.Run("hostile fatbin image", func(t *testing.T) {
		r, dev, _ := newTest(t, nil)
		bad := []byte{0x50, 0xed, 0x55, 0xba, 1, 0, 16, 0, 0xff, 0xff, 0, 0, 0, 0, 0, 0}
		if recordOne(t, r, dev, launch(r.Image(bad), 1)) != 0 {
			t.Error("a kernel of a truncated fat binary was recorded")
		}
		if st := r.Status(); len(st.Errors) != 1 || !strings.Contains(st.Errors[0], "truncated") {
			t.Errorf("errors %q", st.Errors)
		}
	})
}

// The device variables of the kernel's module (named by its cubin, placed
// by the driver) are snapshotted with the allocations; one the driver does
// not find is left out.
func TestDeviceVariablesAreSnapshotted(t *testing.T) {
	r, dev, dir := newTest(t, nil)
	const counter, table = 0x7f0000100000, 0x7f0000200000
	dev.mem[counter] = bytes.Repeat([]byte{7}, 16)
	dev.mem[table] = bytes.Repeat([]byte{3}, 64)
	dev.vars = map[string]uint64{"counter": counter, "_ZL5table": table} // "seed" and "scratch" are not found
	cubin, err := os.ReadFile("testdata/variables.cubin")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := nvbin.ParseCubin(cubin); err != nil || len(c.Variables) != 4 { // _ZL5table, counter, scratch (local), seed
		t.Fatalf("testdata/variables.cubin: %+v %v", c, err)
	}
	l := launch(r.Image(cubin), 1)
	tok := r.LaunchBegin(l)
	dev.mem[counter][0] = 8 // the kernel counts
	r.LaunchEnd(tok, nil)
	pro, epi := firstInstance(t, dir)
	names := func(s *db.Snapshot) (out []string) {
		for _, g := range s.Globals {
			out = append(out, g.Name)
		}
		return out
	}
	if got := names(pro); len(got) != 2 || !slices.Contains(got, "counter") || !slices.Contains(got, "_ZL5table") {
		t.Fatalf("prologue globals %v, want counter and _ZL5table", got)
	}
	for _, g := range epi.Globals {
		if g.Name == "counter" && g.Data[0] != 8 {
			t.Errorf("epilogue counter %d, want the value after the launch", g.Data[0])
		}
	}
	for _, g := range pro.Globals {
		if g.Name == "counter" && g.Data[0] != 7 {
			t.Errorf("prologue counter %d, want the value before the launch", g.Data[0])
		}
	}
}

// TestManagedAllocationsAreListed: every managed allocation is counted and
// listed in the database with the next status (not a write per allocation),
// where replay finds it; past the list's bound they are counted as dropped.
func TestManagedAllocationsAreListed(t *testing.T) {
	r, _, dir := newTest(t, nil)
	r.Managed(0x7f0000000000, 4096)
	r.Managed(0x7f0000100000, 64)
	if _, err := os.Stat(filepath.Join(dir, db.ManagedFileName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the list was written per allocation: %v", err)
	}
	r.Image([]byte("cubin")) // writes the status
	l, err := db.ReadManaged(dir)
	if n := r.Status().ManagedAllocations; err != nil || len(l.Allocations) != 2 || l.Allocations[1] != (db.ManagedAllocation{Addr: "0x7f0000100000", Size: 64}) || n != 2 {
		t.Fatalf("list %+v, %v; counted %d", l, err, n)
	}
	for i := range db.MaxManagedAllocations {
		r.Managed(0x7f1000000000+uint64(i)*4096, 4096)
	}
	r.Image([]byte("cubin"))
	if l, err := db.ReadManaged(dir); err != nil || len(l.Allocations) != db.MaxManagedAllocations || l.Dropped != 2 {
		t.Fatalf("past the bound: %d listed, %d dropped, %v", len(l.Allocations), l.Dropped, err)
	}
}

// markManaged returns a copy of cubin with symbol name's st_other marked
// STO_CUDA_MANAGED, as nvcc marks a __managed__ variable.
func markManaged(t *testing.T, cubin []byte, name string) []byte {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(cubin))
	if err != nil {
		t.Fatal(err)
	}
	symtab := f.SectionByType(elf.SHT_SYMTAB)
	syms, err := f.Symbols()
	if err != nil || symtab == nil {
		t.Fatalf("symbols: %v", err)
	}
	out := append([]byte(nil), cubin...)
	for i, s := range syms {
		if s.Name == name {
			out[symtab.Offset+uint64(i+1)*24+5] |= 0x4 // Symbols() skips the null symbol
			return out
		}
	}
	t.Fatalf("no symbol %s", name)
	return nil
}

// A __managed__ variable of the kernel's module is listed in the managed
// list, with the address the driver gave it, and left out of the snapshots.
func TestManagedVariablesAreListedNotSnapshotted(t *testing.T) {
	r, dev, dir := newTest(t, nil)
	const counter, table = 0x7f0000100000, 0x7f0000200000
	dev.mem[counter] = bytes.Repeat([]byte{7}, 16)
	dev.mem[table] = bytes.Repeat([]byte{3}, 64)
	dev.vars = map[string]uint64{"counter": counter, "_ZL5table": table}
	cubin, err := os.ReadFile("testdata/variables.cubin")
	if err != nil {
		t.Fatal(err)
	}
	l := launch(r.Image(markManaged(t, cubin, "counter")), 1)
	r.LaunchEnd(r.LaunchBegin(l), nil)
	d, err := db.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	k := d.Kernels[0]
	pro, err := d.ReadPrologue(k, k.Instances[k.InstanceIDs()[0]])
	if err != nil {
		t.Fatal(err)
	}
	if len(pro.Globals) != 1 || pro.Globals[0].Name != "_ZL5table" {
		t.Errorf("prologue globals %+v, want _ZL5table alone", pro.Globals)
	}
	ml, err := db.ReadManaged(dir)
	if err != nil || len(ml.Variables) != 1 || ml.Variables[0] != (db.ManagedVariable{Name: "counter", Size: 16, Addr: db.FormatVAddr(counter)}) {
		t.Errorf("managed list %+v, %v", ml, err)
	}
}

// One context is recorded: another GPU's allocations stay out of the
// snapshots (the fingerprint kernel must not read them), and its launches
// run unrecorded, reported once and counted.
func TestOneContextIsRecorded(t *testing.T) {
	r, dev, dir := newTest(t, nil)
	const ctxB, addrC = 0x55a0c0df0000, 0x7f3600000000
	dev.mem[addrC] = bytes.Repeat([]byte{4}, 4096)
	r.Alloc(ctxB, addrC, 4096)
	id := r.Image([]byte("cubin"))
	other := launch(id, 7)
	other.Context = ctxB
	for range 2 {
		if recordOne(t, r, dev, other) != 0 {
			t.Fatal("a launch in a second context was recorded")
		}
	}
	if recordOne(t, r, dev, launch(id, 1)) == 0 {
		t.Fatal("a launch in the recorded context was not recorded")
	}
	unnamed := launch(id, 2)
	unnamed.Context = 0 // the driver named none: taken as the recorded one
	if recordOne(t, r, dev, unnamed) == 0 {
		t.Fatal("a launch without a context was not recorded")
	}
	pro, _ := firstInstance(t, dir)
	for _, b := range pro.Blobs {
		if b.Addr == addrC {
			t.Error("the second context's allocation is in the snapshot")
		}
	}
	st := r.Status()
	if len(st.Errors) != 1 || !strings.Contains(st.Errors[0], "second CUDA context") || st.LaunchesSeen != 4 || st.InstancesRecorded != 2 {
		t.Errorf("status: errors %q, %d launches seen, %d instances", st.Errors, st.LaunchesSeen, st.InstancesRecorded)
	}
}

// A launch on a stream the device says is being captured into a graph runs
// unrecorded (the recorder would synchronize inside the capture); on
// another stream it is recorded.
func TestACapturedLaunchIsNotRecorded(t *testing.T) {
	r, dev, _ := newTest(t, nil)
	dev.captured = 0x99
	l := launch(r.Image([]byte("cubin")), 1)
	l.Stream = 0x99
	if recordOne(t, r, dev, l) != 0 || dev.syncs != 0 {
		t.Fatalf("a captured launch was recorded, or the device synchronized (%d times) for it", dev.syncs)
	}
	l.Stream = 0x10
	if recordOne(t, r, dev, l) == 0 {
		t.Fatal("the launch on a stream not captured was not recorded")
	}
}
