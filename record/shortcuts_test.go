package record

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand"
	"path/filepath"
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/record/arena"
	"github.com/mneme-gpu/mneme/record/fingerprint"
)

// addClear installs a kernel that zeroes n bytes at ptr+offset.
func (g *simGPU) addClear() {
	const name = "_Z5clearPvmm"
	g.irs[name] = &KernelIR{Bitcode: []byte("BC\xc0\xde clear"), ArgNames: []string{"p", "off", "n"}, ArgKinds: []mneme.ArgKind{"ptr", "i64", "i64"}}
	g.kernels[name] = func(g *simGPU, l *Launch) error {
		le := binary.LittleEndian
		p, off, n := le.Uint64(l.Args[0]), le.Uint64(l.Args[1]), le.Uint64(l.Args[2])
		return g.write(p+off, make([]byte, n))
	}
}

func clearLaunch(p, off, n uint64) *Launch {
	return &Launch{Kernel: Kernel{Name: "_Z5clearPvmm", Demangled: "clear(void*, unsigned long, unsigned long)"},
		Grid: mneme.Dim3{X: 1, Y: 1, Z: 1}, Block: mneme.Dim3{X: 1, Y: 1, Z: 1},
		Args: [][]byte{u64(p), u64(off), u64(n)}}
}

// oneSidedScenario records launches whose chunks are zero or already
// stored on one side only: a write into an allocation of zeros (zero in the
// prologue only), a clear of a chunk of data and of a range across a chunk
// boundary (zero in the epilogue only), a second allocation holding a copy
// of the first's data (stored chunks met again in another allocation and at
// another chunk index), and a launch that restores bytes a previous one
// changed (an epilogue chunk equal to an earlier prologue's).
func oneSidedScenario(t *testing.T, g *stagingGPU, full bool) string {
	t.Helper()
	g.addTouch()
	g.addClear()
	g.globals[0] = nil
	dir := filepath.Join(t.TempDir(), "rdb")
	var log bytes.Buffer
	rec, err := New(Config{DB: dir, VABase: arena.DefaultBase, VASize: 64 << 20, Log: &log, FullCopies: full}, g, g.simGPU)
	if err != nil {
		t.Fatal(err)
	}
	rec.stagedMin = 0
	rec.deviceShadowMin = 0
	const mib = 1 << 20
	a, _ := rec.Malloc(2 * mib)
	z, _ := rec.Malloc(2*mib + 12)
	b, _ := rec.Malloc(3 * mib)
	data := make([]byte, 2*mib)
	rand.New(rand.NewSource(11)).Read(data)
	if err := g.write(a, data); err != nil {
		t.Fatal(err)
	}
	// b holds a's chunks one chunk later, and its first chunk is zero.
	if err := g.write(b+mib, data); err != nil {
		t.Fatal(err)
	}
	for _, l := range []*Launch{
		touchLaunch(z, mib+4, 5),            // zero before, written after
		touchLaunch(z, 2*mib+8, 6),          // the same in the last, partial word of the last chunk
		clearLaunch(a, mib, mib),            // data before, zero after: one whole chunk
		clearLaunch(b, mib-8, 16),           // across the boundary of a zero and a data chunk
		touchLaunch(a, 0, 0),                // zero into data: the chunk stays non-zero
		clearLaunch(z, mib, mib+12),         // back to zero: the epilogue equals the first prologue's chunk
		touchLaunch(a, mib+100, 0xfeedbeef), // a's last chunk, also b's
	} {
		if d, err := rec.Launch(l); err != nil || d != Launched {
			t.Fatalf("launch %s: %v, %v; log: %s", l.Kernel.Name, d, err, log.String())
		}
	}
	rec.Finish()
	if log.Len() != 0 {
		t.Fatalf("recording reported: %s", log.String())
	}
	return dir
}

// Chunks skipped because they are zero or already stored read back as the
// full copies do when the condition holds on one side of the launch only,
// written at once or in the background.
func TestStagedChunksZeroOrStoredOnOneSideReadBackAsFullOnes(t *testing.T) {
	want := readAll(t, oneSidedScenario(t, &stagingGPU{simGPU: newSimGPU(), released: map[int]int{}}, true))
	if len(want) != 14 {
		t.Fatalf("%d snapshots, want 14", len(want))
	}
	for _, tc := range []struct {
		name                 string
		noShadow, hostShadow bool
	}{{"at once", true, false}, {"device shadows", false, false}, {"host shadows", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			g := &stagingGPU{simGPU: newSimGPU(), released: map[int]int{}, noShadow: tc.noShadow, hostShadow: tc.hostShadow}
			got := readAll(t, oneSidedScenario(t, g, false))
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
		})
	}
}

// failOnce fails the stagings of the snapshots it is told to, by their
// order, and stages the rest.
type failOnce struct {
	*stagingGPU
	n    int
	fail map[int]bool
}

func (f *failOnce) Stage(runs []fingerprint.Range) (Staging, error) {
	f.n++
	if f.fail[f.n] {
		return nil, fmt.Errorf("staging %d failed", f.n)
	}
	return f.stagingGPU.Stage(runs)
}

// A snapshot that could not be written loses its instance, and the
// recording carries on: later launches are recorded, read back as full
// copies do, and reference no chunk of the file that was never written.
func TestRecorderCarriesOnAfterAFailedWrite(t *testing.T) {
	for _, failed := range []int{1, 2} { // the first prologue; the first epilogue
		t.Run(fmt.Sprintf("staging %d fails", failed), func(t *testing.T) {
			g := &failOnce{stagingGPU: &stagingGPU{simGPU: newSimGPU(), released: map[int]int{}, noShadow: true}, fail: map[int]bool{failed: true}}
			g.addTouch()
			dir := filepath.Join(t.TempDir(), "rdb")
			var log bytes.Buffer
			rec, err := New(Config{DB: dir, VABase: arena.DefaultBase, VASize: 64 << 20, Log: &log}, g, g.simGPU)
			if err != nil {
				t.Fatal(err)
			}
			rec.stagedMin = 0
			const mib = 1 << 20
			a, _ := rec.Malloc(3 * mib)
			data := make([]byte, 3*mib)
			rand.New(rand.NewSource(4)).Read(data)
			g.write(a, data)
			for v := uint32(1); v <= 4; v++ {
				d, err := rec.Launch(touchLaunch(a, uint64(v)*mib/2, v))
				if err != nil {
					t.Fatalf("launch %d: %v", v, err)
				}
				if d == Forward { // lost before the launch: the application runs it
					if err := g.write(a+uint64(v)*mib/2, u32(v)); err != nil {
						t.Fatal(err)
					}
				}
			}
			rec.Finish()
			if !bytes.Contains(log.Bytes(), []byte(fmt.Sprintf("staging %d failed", failed))) {
				t.Errorf("log %q does not report the failure", log.String())
			}
			st, err := ReadStatus(dir)
			if err != nil || st.InstancesRecorded != 3 {
				t.Fatalf("status %+v, %v: want the three launches after the failure recorded", st, err)
			}
			snaps := readAll(t, dir) // reads every chunk, references included
			if len(snaps) != 6 {
				t.Fatalf("%d snapshots, want 6", len(snaps))
			}
			// Each recorded epilogue holds the values of every launch so far.
			for name, s := range snaps {
				if !bytes.HasSuffix([]byte(name), []byte("/epi")) {
					continue
				}
				arg := s.Args[2][0]
				for v := uint32(1); v <= uint32(arg); v++ {
					off := int(v) * mib / 2
					if got := s.Blobs[0].Data[off]; got != byte(v) {
						t.Errorf("%s: byte at %d is %d, want %d", name, off, got, v)
					}
				}
			}
		})
	}
}
