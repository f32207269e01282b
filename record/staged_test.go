package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"path/filepath"
	"sync"
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/record/arena"
	"github.com/mneme-gpu/mneme/record/fingerprint"
)

// stagingGPU is the simulated GPU with fingerprints (the Go reference of the
// GPU kernel) and staged copies, counting what moved and what was handed
// back.
type stagingGPU struct {
	*simGPU
	mu          sync.Mutex // the background writer stages while the test goes on
	copied      int64
	runs        int
	released    map[int]int // per Stage call and run: Release calls
	stages      int
	failStage   error
	fingerprint func([]fingerprint.Range) ([]fingerprint.Sum, error)
	// Shadows: refused when noShadow; otherwise copies kept in host memory
	// at addresses from shadowBase, counted while alive. Host shadows
	// (staged at once through Stage, then held) only when hostShadow.
	noShadow    bool
	hostShadow  bool
	hostMade    int
	hostFreed   int
	shadowLimit int  // > 0: shadows after this many are refused
	shadowStage bool // staging from a shadow fails
	shadows     map[uint64][]byte
	nextShadow  uint64
	shadowsMade int
	prepared    int // PrepareFingerprints calls
}

func (g *stagingGPU) PrepareFingerprints() { g.prepared++ }

const shadowBase = 0x7e0000000000

// The reader is asked once to get its fingerprint kernel ready, when the
// live memory first reaches the size from which snapshots are taken from
// fingerprints, and never when every allocation is copied whole.
func TestFingerprintKernelIsPreparedOnceTheMemoryCallsForIt(t *testing.T) {
	for _, full := range []bool{false, true} {
		g := &stagingGPU{simGPU: newSimGPU(), released: map[int]int{}}
		rec, err := New(Config{DB: filepath.Join(t.TempDir(), "rdb"), VABase: arena.DefaultBase, VASize: 64 << 20, Log: io.Discard, FullCopies: full}, g, g.simGPU)
		if err != nil {
			t.Fatal(err)
		}
		rec.stagedMin = 4 << 20
		var prepared []int
		for _, size := range []uint64{1 << 20, 2 << 20, 1 << 20, 8 << 20, 1 << 20} {
			if _, err := rec.Malloc(size); err != nil {
				t.Fatal(err)
			}
			prepared = append(prepared, g.prepared)
		}
		want := []int{0, 0, 1, 1, 1} // 4 MiB live after the third
		if full {
			want = []int{0, 0, 0, 0, 0}
		}
		if fmt.Sprint(prepared) != fmt.Sprint(want) {
			t.Errorf("full copies %v: PrepareFingerprints calls after each allocation %v, want %v", full, prepared, want)
		}
		rec.Finish()
	}
}

type simShadow struct {
	g    *stagingGPU
	runs []fingerprint.Range
}

func (s *simShadow) Stage() (Staging, error) { return s.g.Stage(s.runs) }
func (s *simShadow) Free() {
	s.g.mu.Lock()
	defer s.g.mu.Unlock()
	for _, r := range s.runs {
		delete(s.g.shadows, r.Addr)
	}
}

// simHostShadow holds runs copied through the staging path at once.
type simHostShadow struct {
	g     *stagingGPU
	data  [][]byte
	stats CopyStats
}

func (s *simHostShadow) Stage() (Staging, error) { return HeldStaging(s.data, s.stats), nil }
func (s *simHostShadow) Free() {
	s.g.mu.Lock()
	s.g.hostFreed++
	s.g.mu.Unlock()
	s.data = nil
}

func (g *stagingGPU) HostShadow(runs []fingerprint.Range) (Shadow, error) {
	if !g.hostShadow {
		return nil, errors.New("no host memory to spare")
	}
	st, err := g.Stage(runs)
	if err != nil {
		return nil, err
	}
	sh := &simHostShadow{g: g}
	for i := range runs {
		b, err := st.Wait(i)
		if err != nil {
			st.Close()
			return nil, err
		}
		sh.data = append(sh.data, b)
		st.Release(i)
	}
	sh.stats = st.Close()
	g.mu.Lock()
	g.hostMade++
	g.mu.Unlock()
	return sh, nil
}

func (g *stagingGPU) Shadow(runs []fingerprint.Range) (Shadow, error) {
	if g.noShadow || g.shadowLimit > 0 && g.shadowsMade >= g.shadowLimit {
		return nil, errors.New("no device memory to spare")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shadows == nil {
		g.shadows = map[uint64][]byte{}
	}
	g.shadowsMade++
	sh := &simShadow{g: g}
	for _, r := range runs {
		b := make([]byte, r.Len)
		if err := g.CopyToHost(b, r.Addr); err != nil {
			return nil, err
		}
		addr := shadowBase + g.nextShadow
		g.nextShadow += r.Len + 4096
		g.shadows[addr] = b
		sh.runs = append(sh.runs, fingerprint.Range{Addr: addr, Len: r.Len})
	}
	return sh, nil
}

// read copies device bytes, or a shadow's.
func (g *stagingGPU) read(dst []byte, addr uint64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if addr >= shadowBase {
		b, ok := g.shadows[addr]
		if !ok || len(b) != len(dst) {
			return fmt.Errorf("no shadow run at %#x", addr)
		}
		copy(dst, b)
		return nil
	}
	return g.CopyToHost(dst, addr)
}

func (g *stagingGPU) Fingerprints(rs []fingerprint.Range) ([]fingerprint.Sum, error) {
	if g.fingerprint != nil {
		return g.fingerprint(rs)
	}
	return g.referenceSums(rs)
}

// referenceSums fingerprints device memory with the Go reference.
func (g *stagingGPU) referenceSums(rs []fingerprint.Range) ([]fingerprint.Sum, error) {
	out := make([]fingerprint.Sum, len(rs))
	for i, r := range rs {
		b := make([]byte, r.Len)
		if err := g.CopyToHost(b, r.Addr); err != nil {
			return nil, err
		}
		out[i] = fingerprint.Chunk(b)
	}
	return out, nil
}

type simStaging struct {
	g     *stagingGPU
	runs  []fingerprint.Range
	stage int
	next  int
}

func (g *stagingGPU) Stage(runs []fingerprint.Range) (Staging, error) {
	if g.failStage != nil {
		return nil, g.failStage
	}
	if g.shadowStage && len(runs) > 0 && runs[0].Addr >= shadowBase {
		return nil, errors.New("pinned staging failed")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stages++
	return &simStaging{g: g, runs: runs, stage: g.stages}, nil
}

func (s *simStaging) Wait(i int) ([]byte, error) {
	if i != s.next {
		return nil, fmt.Errorf("run %d waited for out of order (want %d)", i, s.next)
	}
	s.next++
	b := make([]byte, s.runs[i].Len)
	if err := s.g.read(b, s.runs[i].Addr); err != nil {
		return nil, err
	}
	s.g.mu.Lock()
	s.g.copied += int64(len(b))
	s.g.runs++
	s.g.mu.Unlock()
	return b, nil
}

func (s *simStaging) Release(i int) {
	s.g.mu.Lock()
	s.g.released[s.stage<<16|i]++
	s.g.mu.Unlock()
}

func (s *simStaging) Close() CopyStats {
	var n int64
	for _, r := range s.runs[:s.next] {
		n += int64(r.Len)
	}
	return CopyStats{Bytes: n, TransferSeconds: 1e-3}
}

// addTouch installs a kernel that stores a u32 at ptr+offset.
func (g *simGPU) addTouch() {
	const name = "_Z5touchPjmj"
	g.irs[name] = &KernelIR{Bitcode: []byte("BC\xc0\xde touch"), ArgNames: []string{"p", "off", "v"}, ArgKinds: []mneme.ArgKind{"ptr", "i64", "i32"}}
	g.kernels[name] = func(g *simGPU, l *Launch) error {
		p := binary.LittleEndian.Uint64(l.Args[0])
		off := binary.LittleEndian.Uint64(l.Args[1])
		return g.write(p+off, l.Args[2])
	}
}

func touchLaunch(p, off uint64, v uint32) *Launch {
	return &Launch{Kernel: Kernel{Name: "_Z5touchPjmj", Demangled: "touch(unsigned*, unsigned long, unsigned)"},
		Grid: mneme.Dim3{X: 1, Y: 1, Z: 1}, Block: mneme.Dim3{X: 1, Y: 1, Z: 1},
		Args: [][]byte{u64(p), u64(off), u32(v)}}
}

// stagedScenario records two launches of touch over three allocations (5 MiB
// of random data, 3 MiB of zeros, 2 MiB + 100 bytes of data) and returns the
// database directory. It is run once staged and once with full copies; both
// must read back the same.
func stagedScenario(t *testing.T, full, noShadow bool) (string, *stagingGPU) {
	return stagedScenarioOn(t, &stagingGPU{simGPU: newSimGPU(), released: map[int]int{}, noShadow: noShadow}, full)
}

func stagedScenarioOn(t *testing.T, g *stagingGPU, full bool) (string, *stagingGPU) {
	t.Helper()
	g.addTouch()
	g.globals[0] = nil
	dir := filepath.Join(t.TempDir(), "rdb")
	var log bytes.Buffer
	rec, err := New(Config{DB: dir, VABase: arena.DefaultBase, VASize: 64 << 20, Log: &log, FullCopies: full}, g, g.simGPU)
	if err != nil {
		t.Fatal(err)
	}
	rec.stagedMin = 0
	rec.deviceShadowMin = 0 // the scenario's few MiB are "large"
	const mib = 1 << 20
	rnd := rand.New(rand.NewSource(5))
	a, _ := rec.Malloc(5 * mib)
	_, _ = rec.Malloc(3 * mib)
	c, _ := rec.Malloc(2*mib + 100)
	for _, buf := range []struct {
		addr uint64
		n    int
	}{{a, 5 * mib}, {c, 2*mib + 100}} {
		b := make([]byte, buf.n)
		rnd.Read(b)
		if err := g.write(buf.addr, b); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range []*Launch{touchLaunch(a, 2*mib+8, 0xdeadbeef), touchLaunch(c, 2*mib+96, 7)} {
		if d, err := rec.Launch(l); err != nil || d != Launched {
			t.Fatalf("launch: %v, %v; log: %s", d, err, log.String())
		}
	}
	rec.Finish()
	if log.Len() != 0 {
		t.Fatalf("recording reported: %s", log.String())
	}
	return dir, g
}

func readAll(t *testing.T, dir string) map[string]*db.Snapshot {
	t.Helper()
	d, err := db.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*db.Snapshot{}
	for _, k := range d.Kernels {
		for _, inst := range k.Instances {
			pro, err := d.ReadPrologue(k, inst)
			if err != nil {
				t.Fatal(err)
			}
			epi, err := d.ReadEpilogue(k, inst)
			if err != nil {
				t.Fatal(err)
			}
			out[k.KernelName+"/"+inst.DynamicHash+"/pro"] = pro
			out[k.KernelName+"/"+inst.DynamicHash+"/epi"] = epi
		}
	}
	return out
}

func TestStagedSnapshotsCopyOnlyWhatIsNewAndReadBackAsFullOnes(t *testing.T) {
	fullDir, _ := stagedScenario(t, true, false)
	for _, tc := range []struct {
		name                 string
		noShadow, hostShadow bool
	}{{"written at once", true, false}, {"written in the background from device shadows", false, false},
		{"written in the background from device shadows, host memory to spare too", false, true},
		{"written in the background from host shadows", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			stagedMatchesFull(t, fullDir, &stagingGPU{simGPU: newSimGPU(), released: map[int]int{}, noShadow: tc.noShadow, hostShadow: tc.hostShadow})
		})
	}
}

func stagedMatchesFull(t *testing.T, fullDir string, g *stagingGPU) {
	stagedDir, _ := stagedScenarioOn(t, g, false)
	// Three snapshots copy chunks: each gets a shadow, on the device when
	// it can spare the memory, else on the host; every one is freed.
	wantHost, wantDevice := 0, 3
	switch {
	case g.noShadow && !g.hostShadow:
		wantDevice = 0
	case g.noShadow:
		wantHost, wantDevice = 3, 0
	}
	if g.shadowsMade != wantDevice || len(g.shadows) != 0 || g.hostMade != wantHost || g.hostFreed != wantHost {
		t.Errorf("%d device shadows made (%d not freed), %d host shadows made (%d freed); want %d and %d",
			g.shadowsMade, len(g.shadows), g.hostMade, g.hostFreed, wantDevice, wantHost)
	}
	want, got := readAll(t, fullDir), readAll(t, stagedDir)
	if len(got) != 4 || len(want) != 4 {
		t.Fatalf("%d and %d snapshots, want 4", len(got), len(want))
	}
	for name, w := range want {
		s := got[name]
		if s == nil || len(s.Blobs) != len(w.Blobs) {
			t.Fatalf("%s: missing or with other blobs", name)
		}
		for i := range w.Blobs {
			if s.Blobs[i].Addr != w.Blobs[i].Addr || !bytes.Equal(s.Blobs[i].Data, w.Blobs[i].Data) {
				t.Errorf("%s: blob %d differs from the full copy", name, i)
			}
		}
	}
	// The first prologue copies the 5 + 3 data chunks (the zero
	// allocation's 3 are not copied); its epilogue only the changed chunk
	// of a. The second prologue is all known; its epilogue copies only the
	// changed last chunk of c.
	const mib = 1 << 20
	st, err := ReadStatus(stagedDir)
	if err != nil {
		t.Fatal(err)
	}
	if st.HostShadows != int64(wantHost) || st.DeviceShadows != int64(wantDevice) {
		t.Errorf("status says %d host and %d device shadows, want %d and %d", st.HostShadows, st.DeviceShadows, wantHost, wantDevice)
	}
	if st.InstancesRecorded != 2 || st.KernelsRecorded != 1 {
		t.Errorf("status says %d instances of %d kernels, want 2 of 1", st.InstancesRecorded, st.KernelsRecorded)
	}
	if st.ChunksCopied != 10 || st.ChunksZero != 12 || st.ChunksReferenced != 22 {
		t.Errorf("chunks copied %d, zero %d, referenced %d; want 10, 12, 22", st.ChunksCopied, st.ChunksZero, st.ChunksReferenced)
	}
	if wantBytes := int64(7*mib + 100 + mib + 100); g.copied != wantBytes || st.CopiedBytes != wantBytes {
		t.Errorf("copied %d bytes (status %d), want %d", g.copied, st.CopiedBytes, wantBytes)
	}
	// The largest is the first prologue's copy of fresh data.
	if st.LargestCopyBytes != 7*mib+100 || st.LargestCopySeconds <= 0 {
		t.Errorf("largest snapshot copied %d bytes in %gs, want %d in a positive time", st.LargestCopyBytes, st.LargestCopySeconds, 7*mib+100)
	}
	for k, n := range g.released {
		if n != 1 {
			t.Errorf("run %x released %d times", k, n)
		}
	}
	if len(g.released) != g.runs {
		t.Errorf("%d runs waited for, %d released", g.runs, len(g.released))
	}
	fullSt, _ := ReadStatus(fullDir)
	if st.SnapshotBytes*2 > fullSt.SnapshotBytes || st.SnapshotRawBytes != fullSt.SnapshotRawBytes {
		t.Errorf("staged snapshots take %d bytes for %d of data; full copies %d for %d", st.SnapshotBytes, st.SnapshotRawBytes, fullSt.SnapshotBytes, fullSt.SnapshotRawBytes)
	}
}

// A failure to fingerprint or to stage loses the instance, not the launch:
// the application's kernel still runs once, and what was written reads back.
func TestStagedFailuresForwardTheLaunch(t *testing.T) {
	for _, c := range []struct {
		name string
		set  func(g *stagingGPU)
	}{
		{"fingerprints", func(g *stagingGPU) {
			g.fingerprint = func([]fingerprint.Range) ([]fingerprint.Sum, error) { return nil, errors.New("no module") }
		}},
		{"short fingerprints", func(g *stagingGPU) {
			g.fingerprint = func([]fingerprint.Range) ([]fingerprint.Sum, error) { return nil, nil }
		}},
		{"staging", func(g *stagingGPU) { g.failStage = errors.New("out of pinned memory") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := &stagingGPU{simGPU: newSimGPU(), released: map[int]int{}, noShadow: true}
			c.set(g)
			_, log, d, err := touchOnce(t, g)
			if err != nil || d != Forward {
				t.Fatalf("decision %v, %v; want the launch forwarded", d, err)
			}
			if g.launches != 0 {
				t.Errorf("the recorder launched %d times before forwarding", g.launches)
			}
			if !bytes.Contains(log.Bytes(), []byte("prologue snapshot")) {
				t.Errorf("log %q does not report the prologue", log.String())
			}
		})
	}
}

// touchOnce records one launch of touch over a 64-byte allocation, staged
// whatever its size, and returns the recorder, its log and the decision.
func touchOnce(t *testing.T, g *stagingGPU) (*Recorder, *bytes.Buffer, Decision, error) {
	t.Helper()
	g.addTouch()
	log := &bytes.Buffer{}
	rec, err := New(Config{DB: filepath.Join(t.TempDir(), "rdb"), VABase: arena.DefaultBase, VASize: 64 << 20, Log: log}, g, g.simGPU)
	if err != nil {
		t.Fatal(err)
	}
	rec.stagedMin = 0
	p, _ := rec.Malloc(64)
	g.write(p, []byte{1})
	d, err := rec.Launch(touchLaunch(p, 0, 9))
	return rec, log, d, err
}

// A snapshot that fails in the background loses its instance after the
// launch: the kernel ran once (by the recorder), the error is reported,
// and the database does not name the instance.
func TestBackgroundFailureDropsTheInstance(t *testing.T) {
	g := &stagingGPU{simGPU: newSimGPU(), released: map[int]int{}, failStage: errors.New("out of pinned memory")}
	rec, log, d, err := touchOnce(t, g)
	if err != nil || d != Launched || g.launches != 1 {
		t.Fatalf("decision %v, %v, %d launches; want Launched once", d, err, g.launches)
	}
	rec.Finish()
	dir := rec.cfg.DB
	if !bytes.Contains(log.Bytes(), []byte("not recorded")) || !bytes.Contains(log.Bytes(), []byte("out of pinned memory")) {
		t.Errorf("log %q does not say the instance was lost and why", log.String())
	}
	if st, err := ReadStatus(dir); err != nil || st.InstancesRecorded != 0 {
		t.Errorf("status %+v, %v: want no instance recorded", st, err)
	}
	if d, err := db.Open(dir); err == nil && d.NumInstances() != 0 {
		t.Errorf("the database names %d instances", d.NumInstances())
	}
}

func TestCopyModesFromTheEnvironment(t *testing.T) {
	for _, c := range []struct {
		full, background, shadow string
		wantFull, wantNo         bool
		bad                      string
	}{
		{"", "", "", false, false, ""},
		{"1", "0", "", true, true, ""},
		{"0", "1", ShadowHost, false, false, ""},
		{"", "", ShadowDevice, false, false, ""},
		{"yes", "", "", false, false, EnvFullCopies},
		{"", "off", "", false, false, EnvBackground},
		{"", "", "gpu", false, false, EnvShadow},
	} {
		env := map[string]string{EnvDB: "/tmp/x", EnvFullCopies: c.full, EnvBackground: c.background, EnvShadow: c.shadow}
		cfg, err := ConfigFromEnv(func(k string) string { return env[k] })
		if c.bad != "" {
			if err == nil || !bytes.Contains([]byte(err.Error()), []byte(c.bad)) {
				t.Errorf("%q %q %q: error %v, want one naming %s", c.full, c.background, c.shadow, err, c.bad)
			}
			continue
		}
		if err != nil || cfg.FullCopies != c.wantFull || cfg.NoBackground != c.wantNo || cfg.Shadow != c.shadow {
			t.Errorf("%q %q %q: %+v, %v", c.full, c.background, c.shadow, cfg, err)
		}
	}
}

// Below minStagedBytes of live memory an instance is copied whole: no
// fingerprint kernel, no staging.
func TestSmallRecordingsAreCopiedWhole(t *testing.T) {
	g := &stagingGPU{simGPU: newSimGPU(), released: map[int]int{}}
	g.addTouch()
	g.fingerprint = func([]fingerprint.Range) ([]fingerprint.Sum, error) {
		t.Error("a small recording fingerprinted its memory")
		return nil, errors.New("unexpected")
	}
	dir := filepath.Join(t.TempDir(), "rdb")
	rec, err := New(Config{DB: dir, VABase: arena.DefaultBase, VASize: 64 << 20}, g, g.simGPU)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := rec.Malloc(minStagedBytes - 1)
	if d, err := rec.Launch(touchLaunch(p, 0, 9)); err != nil || d != Launched {
		t.Fatalf("decision %v, %v", d, err)
	}
	rec.Finish()
	if st, _ := ReadStatus(dir); st == nil || st.InstancesRecorded != 1 || st.CopiedBytes < 2*(minStagedBytes-1) || st.ChunksCopied+st.ChunksZero+st.ChunksReferenced != 0 {
		t.Errorf("status %+v: want one instance copied whole", st)
	}
}

// An instance lost after its prologue was planned is not recorded again
// under the same file names: other snapshots may reference that prologue's
// chunks, and writing it again with other contents would change them.
func TestLostInstanceIsNotRewritten(t *testing.T) {
	g := &stagingGPU{simGPU: newSimGPU(), released: map[int]int{}, noShadow: true}
	calls := 0
	g.fingerprint = func(rs []fingerprint.Range) ([]fingerprint.Sum, error) {
		calls++
		if calls == 2 { // the first epilogue
			return nil, errors.New("fingerprint kernel failed")
		}
		return g.referenceSums(rs)
	}
	rec, log, d, err := touchOnce(t, g)
	if err != nil || d != Launched || !bytes.Contains(log.Bytes(), []byte("epilogue snapshot")) {
		t.Fatalf("first launch: %v, %v, log %q", d, err, log.String())
	}
	p := rec.arena.Live()[0].Addr
	before := g.launches
	if d, err := rec.Launch(touchLaunch(p, 0, 9)); err != nil || d != Forward {
		t.Fatalf("the same launch again: %v, %v; want it forwarded, not recorded again", d, err)
	}
	if g.launches != before || calls != 2 {
		t.Errorf("the recorder launched or fingerprinted again (%d launches, %d fingerprint calls)", g.launches-before, calls)
	}
}

// An epilogue written at once, after a queued prologue failed, is not
// written with references into that missing prologue: the instance is lost
// and says why.
func TestWrittenAtOnceAfterAFailedQueuedSnapshot(t *testing.T) {
	g := &stagingGPU{simGPU: newSimGPU(), released: map[int]int{}, shadowLimit: 1, shadowStage: true}
	g.addTouch()
	var log bytes.Buffer
	rec, err := New(Config{DB: filepath.Join(t.TempDir(), "rdb"), VABase: arena.DefaultBase, VASize: 64 << 20, Log: &log}, g, g.simGPU)
	if err != nil {
		t.Fatal(err)
	}
	rec.stagedMin = 0
	// Three chunks of data; the launch changes the first, so the epilogue
	// references the prologue's other two.
	p, _ := rec.Malloc(3 << 20)
	data := make([]byte, 3<<20)
	rand.New(rand.NewSource(1)).Read(data)
	g.write(p, data)
	if d, err := rec.Launch(touchLaunch(p, 0, 9)); err != nil || d != Launched {
		t.Fatalf("decision %v, %v", d, err)
	}
	rec.Finish()
	if !bytes.Contains(log.Bytes(), []byte("which could not be written")) {
		t.Errorf("log %q does not say the epilogue references a prologue that could not be written", log.String())
	}
	ents, _ := filepath.Glob(filepath.Join(rec.cfg.DB, "DeviceState.epilogue.*"))
	if len(ents) != 0 {
		t.Errorf("an epilogue referencing a missing prologue was written: %v", ents)
	}
	if st, _ := ReadStatus(rec.cfg.DB); st == nil || st.InstancesRecorded != 0 {
		t.Errorf("status %+v: want no instance", st)
	}
}

// MNEME_SHADOW chooses where background copies go: device only leaves host
// memory unused even where it could be had; host only writes at once
// rather than on the device when the host refuses; auto takes the device
// first for large snapshots (the application waits milliseconds, not a
// copy through the bus) and the host first for small ones (the writer then
// makes no driver call), the other when the first refuses.
func TestShadowPlaceIsHonoured(t *testing.T) {
	for _, tc := range []struct {
		place              string
		small              bool // the snapshots are under deviceShadowMin
		hostOK, deviceOK   bool
		wantHost, wantDevs int
	}{{ShadowDevice, false, true, true, 0, 3}, {ShadowDevice, false, true, false, 0, 0}, {ShadowDevice, true, true, true, 0, 3},
		{ShadowHost, false, false, true, 0, 0}, {ShadowHost, false, true, true, 3, 0},
		{ShadowAuto, false, false, true, 0, 3}, {ShadowAuto, false, true, true, 0, 3},
		{ShadowAuto, false, true, false, 3, 0}, {ShadowAuto, false, false, false, 0, 0},
		{ShadowAuto, true, true, true, 3, 0}, {ShadowAuto, true, false, true, 0, 3}} {
		g := &stagingGPU{simGPU: newSimGPU(), released: map[int]int{}, hostShadow: tc.hostOK, noShadow: !tc.deviceOK}
		g.addTouch()
		g.globals[0] = nil
		dir := filepath.Join(t.TempDir(), "rdb")
		var log bytes.Buffer
		rec, err := New(Config{DB: dir, VABase: arena.DefaultBase, VASize: 64 << 20, Log: &log, Shadow: tc.place}, g, g.simGPU)
		if err != nil {
			t.Fatal(err)
		}
		rec.stagedMin = 0
		rec.deviceShadowMin = 0
		if tc.small {
			rec.deviceShadowMin = 1 << 30
		}
		a, _ := rec.Malloc(4 << 20)
		b := make([]byte, 4<<20)
		rand.New(rand.NewSource(9)).Read(b)
		if err := g.write(a, b); err != nil {
			t.Fatal(err)
		}
		for _, v := range []uint32{1, 2} {
			if d, err := rec.Launch(touchLaunch(a, uint64(v)*8, v)); err != nil || d != Launched {
				t.Fatalf("%s: launch: %v, %v; %s", tc.place, d, err, log.String())
			}
		}
		rec.Finish()
		if g.hostMade != tc.wantHost || g.shadowsMade != tc.wantDevs {
			t.Errorf("%s (small: %v, host can spare: %v, device: %v): %d host and %d device shadows, want %d and %d",
				tc.place, tc.small, tc.hostOK, tc.deviceOK, g.hostMade, g.shadowsMade, tc.wantHost, tc.wantDevs)
		}
		if len(readAll(t, dir)) != 4 {
			t.Errorf("%s: the two instances were not recorded", tc.place)
		}
	}
}
