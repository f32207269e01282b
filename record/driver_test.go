package record

import (
	"bytes"
	"errors"
	"math/rand"
	"path/filepath"
	"testing"

	"github.com/mneme-gpu/mneme/db"
)

// driverGPU is the staging GPU seen through the driver: its modules' images
// are handed over (DeviceCoder), allocations are placed by the "driver"
// (mapped here at addresses the test picks, then tracked), and the driver
// performs each launch between BeginLaunch and EndLaunch.
type driverGPU struct{ *stagingGPU }

var driverImage = []byte("\x7fELF pretend cubin of touch")

func (g driverGPU) DeviceCode(module int) ([]byte, error) {
	if module != 3 {
		return nil, errors.New("the module it came from was not seen loading")
	}
	return driverImage, nil
}

// Allocations through the driver, 64 MiB apart as the driver places large
// ones, the last across an AddressAlign boundary.
const (
	driverA = 0x7f3550000000
	driverB = 0x7f3554000000
	driverC = 0x7f3557e00000
)

// driverScenario is stagedScenarioOn through the driver: the same three
// allocations and two launches of touch, the kernel machine code only.
func driverScenario(t *testing.T, g *stagingGPU, full bool) (string, *Recorder) {
	t.Helper()
	g.addTouch()
	dir := filepath.Join(t.TempDir(), "rdb")
	var log bytes.Buffer
	rec, err := NewThroughDriver(Config{DB: dir, Log: &log, FullCopies: full}, driverGPU{g})
	if err != nil {
		t.Fatal(err)
	}
	rec.stagedMin = 0
	rec.deviceShadowMin = 0
	const mib = 1 << 20
	rnd := rand.New(rand.NewSource(5))
	for _, a := range []struct {
		addr uint64
		n    int
		data bool
	}{{driverA, 5 * mib, true}, {driverB, 3 * mib, false}, {driverC, 2*mib + 100, true}} {
		if err := g.Map(a.addr, uint64(a.n+int(g.gran)-1)/g.gran*g.gran); err != nil {
			t.Fatal(err)
		}
		rec.TrackAllocation(a.addr, uint64(a.n))
		if a.data {
			b := make([]byte, a.n)
			rnd.Read(b)
			if err := g.write(a.addr, b); err != nil {
				t.Fatal(err)
			}
		}
	}
	rec.TrackAllocation(0x7f3560000000, 0) // counted, nothing to hold
	for _, l := range []*Launch{touchLaunch(driverA, 2*mib+8, 0xdeadbeef), touchLaunch(driverC, 2*mib+96, 7)} {
		l.Kernel.Module = 3
		tok := rec.BeginLaunch(l)
		if tok == 0 {
			t.Fatalf("launch not recorded; log: %s", log.String())
		}
		if err := g.Launch(l); err != nil { // the driver performs it
			t.Fatal(err)
		}
		rec.EndLaunch(tok, nil)
	}
	rec.Finish()
	if log.Len() != 0 {
		t.Fatalf("recording reported: %s", log.String())
	}
	return dir, rec
}

// Through the driver, snapshots are taken as the wrapper's are: from
// fingerprints, copying only what no earlier snapshot holds, from shadow
// copies written in the background; they read back as whole copies do, and
// the kernel file says machine code and covers the allocations.
func TestThroughTheDriverSnapshotsAreStagedAsTheWrappers(t *testing.T) {
	fullDir, _ := driverScenario(t, &stagingGPU{simGPU: newSimGPU(), released: map[int]int{}}, true)
	g := &stagingGPU{simGPU: newSimGPU(), released: map[int]int{}}
	dir, rec := driverScenario(t, g, false)
	want, got := readAll(t, fullDir), readAll(t, dir)
	if len(got) != 4 || len(want) != 4 {
		t.Fatalf("%d and %d snapshots, want 4", len(got), len(want))
	}
	for name, w := range want {
		s := got[name]
		if s == nil || len(s.Blobs) != 3 || len(s.Blobs) != len(w.Blobs) {
			t.Fatalf("%s: missing or with other blobs", name)
		}
		for i := range w.Blobs {
			if s.Blobs[i].Addr != w.Blobs[i].Addr || !bytes.Equal(s.Blobs[i].Data, w.Blobs[i].Data) {
				t.Errorf("%s: blob %d differs from the whole copy", name, i)
			}
		}
	}
	st := rec.Status()
	if st.ChunksCopied != 10 || st.ChunksZero != 12 || st.ChunksReferenced != 22 || st.DeviceShadows != 3 {
		t.Errorf("chunks copied %d, zero %d, referenced %d, device shadows %d; want 10, 12, 22, 3", st.ChunksCopied, st.ChunksZero, st.ChunksReferenced, st.DeviceShadows)
	}
	if st.Allocations != 4 || st.InstancesRecorded != 2 || st.KernelsRecorded != 1 || st.KernelsRegistered != 1 || st.ArenaBase != "" {
		t.Errorf("status: %d allocations, %d instances of %d kernels (%d seen), arena %q", st.Allocations, st.InstancesRecorded, st.KernelsRecorded, st.KernelsRegistered, st.ArenaBase)
	}
	if want := uint64(10<<20 + 100); st.ArenaPeak != want {
		t.Errorf("peak of the tracked allocations %d, want %d", st.ArenaPeak, want)
	}
	if len(g.shadows) != 0 {
		t.Errorf("%d device shadows not freed", len(g.shadows))
	}
	d, err := db.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	k := d.Kernels[0]
	if !k.MachineCodeOnly() || k.StaticHash != db.StaticHash(k.KernelName, driverImage) || len(k.ArgKinds) != 3 || k.ArgKinds[0] != "byval:8" {
		t.Errorf("kernel %s: code %q, arguments %v; want machine code, raw bytes", k.StaticHash, k.Code, k.ArgKinds)
	}
	base, err := k.ParseVAddr()
	if err != nil || base != driverA || base+k.VASize != driverC/AddressAlign*AddressAlign+2*AddressAlign {
		t.Errorf("declared range %#x+%#x (%v), want the allocations' 64 MiB blocks", base, k.VASize, err)
	}
}

// A freed allocation leaves the snapshots; one never tracked (the
// recorder's own memory, freed from its own threads) changes nothing.
func TestThroughTheDriverFreesAreTracked(t *testing.T) {
	g := &stagingGPU{simGPU: newSimGPU(), released: map[int]int{}}
	rec, err := NewThroughDriver(Config{DB: t.TempDir(), Log: &bytes.Buffer{}}, driverGPU{g})
	if err != nil {
		t.Fatal(err)
	}
	rec.TrackAllocation(driverA, 100)
	rec.TrackAllocation(driverB, 200)
	rec.UntrackAllocation(0x7e0000000000)
	if live := rec.live(); len(live) != 2 || live[0].Addr != driverA || live[1].Size != 200 {
		t.Fatalf("live %+v after freeing an untracked address", live)
	}
	rec.UntrackAllocation(driverA)
	if live := rec.live(); len(live) != 1 || live[0].Addr != driverB {
		t.Fatalf("live %+v after freeing A", live)
	}
	rec.TrackAllocation(driverA, 50)
	rec.ReportError("writes the status") // the peak stays what A and B held together
	if st := rec.Status(); st.ArenaPeak != 300 {
		t.Errorf("peak %d after freeing A and taking less, want 300", st.ArenaPeak)
	}
	rec.ContextEnds()
	if live := rec.live(); len(live) != 0 {
		t.Fatalf("live %+v after the context ended", live)
	}
}

// A process that cannot hand over module images cannot be recorded
// through the driver: its kernels would have no code.
func TestThroughTheDriverNeedsModuleImages(t *testing.T) {
	if _, err := NewThroughDriver(Config{DB: t.TempDir()}, newSimGPU()); err == nil {
		t.Fatal("a process without module images was accepted")
	}
}

// One launch is recorded at a time: another thread's launch meanwhile runs
// as it is, and a stale token completes nothing.
func TestThroughTheDriverOneLaunchAtATime(t *testing.T) {
	g := &stagingGPU{simGPU: newSimGPU(), released: map[int]int{}}
	g.addTouch()
	dir := t.TempDir()
	rec, err := NewThroughDriver(Config{DB: dir, Log: &bytes.Buffer{}}, driverGPU{g})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Map(driverA, g.gran); err != nil {
		t.Fatal(err)
	}
	rec.TrackAllocation(driverA, 64)
	first, second := touchLaunch(driverA, 0, 1), touchLaunch(driverA, 4, 2)
	first.Kernel.Module, second.Kernel.Module = 3, 3
	tok := rec.BeginLaunch(first)
	if tok == 0 {
		t.Fatal("the first launch was not recorded")
	}
	if rec.BeginLaunch(second) != 0 {
		t.Fatal("a second launch was recorded while the first was in flight")
	}
	rec.EndLaunch(tok+1, nil) // stale
	if st := rec.Status(); st.InstancesRecorded != 0 {
		t.Fatal("a stale token completed the instance")
	}
	rec.EndLaunch(tok, nil)
	if st := rec.Status(); st.InstancesRecorded != 1 || st.LaunchesSeen != 2 {
		t.Errorf("%d instances of %d launches seen, want 1 of 2", st.InstancesRecorded, st.LaunchesSeen)
	}
	if tok2 := rec.BeginLaunch(second); tok2 == 0 || tok2 == tok {
		t.Errorf("after the first completed, the second got token %d (first %d)", tok2, tok)
	}
}

// capturingGPU is the driver's GPU with one stream being captured into a
// graph (record.GraphCapture; the stream is the launch's Native).
type capturingGPU struct {
	driverGPU
	asked int
}

const capturedStream = uintptr(0x99)

func (g *capturingGPU) Captured(l *Launch) bool {
	g.asked++
	s, _ := l.Native.(uintptr)
	return s == capturedStream
}

// A launch on a stream being captured runs unrecorded; the same launch on
// another stream is recorded. Only launches about to be recorded are asked
// about: a repeat of a recorded instance is not.
func TestACapturedLaunchIsNotRecorded(t *testing.T) {
	g := &capturingGPU{driverGPU: driverGPU{&stagingGPU{simGPU: newSimGPU(), released: map[int]int{}}}}
	g.addTouch()
	rec, err := NewThroughDriver(Config{DB: t.TempDir(), Log: &bytes.Buffer{}}, g)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Map(driverA, g.gran); err != nil {
		t.Fatal(err)
	}
	rec.TrackAllocation(driverA, 64)
	l := touchLaunch(driverA, 0, 1)
	l.Kernel.Module, l.Native = 3, capturedStream
	if tok := rec.BeginLaunch(l); tok != 0 {
		t.Fatal("a launch on a captured stream was recorded")
	}
	l.Native = uintptr(0x10)
	tok := rec.BeginLaunch(l)
	if tok == 0 {
		t.Fatal("the launch on a stream not captured was not recorded")
	}
	rec.EndLaunch(tok, nil)
	if rec.BeginLaunch(l) != 0 || g.asked != 2 {
		t.Errorf("a repeat was recorded or asked about: asked %d times, want 2", g.asked)
	}
	if st := rec.Status(); st.InstancesRecorded != 1 || st.LaunchesSeen != 3 || len(st.Errors) != 0 {
		t.Errorf("%d instances of %d launches, errors %q; want 1 of 3, none", st.InstancesRecorded, st.LaunchesSeen, st.Errors)
	}
}
