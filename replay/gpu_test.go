package replay

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/cuda"
	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/internal/gputest"
	"github.com/mneme-gpu/mneme/replay/internal/compare"
	"github.com/mneme-gpu/mneme/replay/internal/fixture"
)

// needGPU skips the test when this machine has no CUDA driver or GPU, and
// fails it on any other error (gputest.Need).
func needGPU(t testing.TB) {
	t.Helper()
	gputest.Need(t, cuda.Init())
	n, err := cuda.DeviceCount()
	gputest.Need(t, err)
	if n == 0 {
		gputest.Skip(t, "no GPU: the CUDA driver sees no device")
	}
}

// recordOnGPU runs the launch on the GPU and writes its database.
func recordOnGPU(t testing.TB, l *fixture.Launch) string {
	t.Helper()
	needGPU(t)
	ir := testIR(t)
	dir := t.TempDir()
	// MNEME_REPLAY_TEST_DBDIR keeps the recordings, for trying the CLI on them.
	if keep := os.Getenv("MNEME_REPLAY_TEST_DBDIR"); keep != "" {
		dir = filepath.Join(keep, strings.ReplaceAll(t.Name(), "/", "_"))
	}
	if _, err := fixture.Record(dir, ir, l); err != nil {
		t.Fatalf("recording %s: %v", l.Kernel, err)
	}
	return dir
}

func openSession(t testing.TB, dir string, opts Options) *Session {
	t.Helper()
	opts.DB = dir
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mustRun(t *testing.T, s *Session, cfg mneme.Config) *mneme.Result {
	t.Helper()
	res, err := s.Run(cfg)
	if err != nil {
		t.Fatalf("Run(%+v): %v", cfg, err)
	}
	return res
}

func wantVerified(t *testing.T, what string, res *mneme.Result, iterations int) {
	t.Helper()
	if res.Status != mneme.StatusVerified || !res.Verified || !res.Executed || res.Failed {
		t.Fatalf("%s: status %s verified %v executed %v: %s %s", what, res.Status, res.Verified, res.Executed, res.Error, res.Mismatch)
	}
	if len(res.ExecTime) != iterations {
		t.Fatalf("%s: %d exec times, want %d", what, len(res.ExecTime), iterations)
	}
	for _, ns := range res.ExecTime {
		if ns <= 0 || ns > 1e9 {
			t.Fatalf("%s: exec time %v ns", what, ns)
		}
	}
}

// epilogueOf and prologueOf read a recorded snapshot of the session's
// instance whole (a session streams the allocations into the device and
// keeps none).
func epilogueOf(t *testing.T, s *Session) *db.Snapshot { return readWhole(t, s, s.rec.DB.ReadEpilogue) }
func prologueOf(t *testing.T, s *Session) *db.Snapshot { return readWhole(t, s, s.rec.DB.ReadPrologue) }

func readWhole(t *testing.T, s *Session, read func(*db.Kernel, *db.Instance) (*db.Snapshot, error)) *db.Snapshot {
	t.Helper()
	snap, err := read(s.rec.Kernel, s.rec.Instance)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// sameMemory compares a snapshot of the replay's output with the recording.
func sameMemory(t *testing.T, what string, got, want *db.Snapshot) {
	t.Helper()
	for i := range want.Blobs {
		if !bytes.Equal(got.Blobs[i].Data, want.Blobs[i].Data) {
			t.Fatalf("%s: allocation %d (0x%x) differs from the recorded epilogue", what, i, want.Blobs[i].Addr)
		}
	}
	for i := range want.Globals {
		if !bytes.Equal(got.Globals[i].Data, want.Globals[i].Data) {
			t.Fatalf("%s: global %s is % x, recorded % x", what, want.Globals[i].Name, got.Globals[i].Data, want.Globals[i].Data)
		}
	}
}

func TestGPUVecAdd(t *testing.T) {
	const n = 1 << 20
	dir := recordOnGPU(t, vecaddLaunch(n))
	s := openSession(t, dir, Options{Iterations: 5, Warmup: 1})
	t.Logf("device %s, timer %s", s.Device().Name, s.Timer())

	base := s.Baseline()
	res := mustRun(t, s, base)
	wantVerified(t, "baseline", res, 5)
	if res.GPUName == "" || res.Timer == "" || res.RegUsage == 0 || res.ObjSize == 0 {
		t.Fatalf("baseline result lacks device or compile facts: %+v", res)
	}
	t.Logf("baseline: exec %v ns, regs %d, split reset %.1fus launch %.1fus sync %.1fus verify %.1fus",
		res.ExecTime, res.RegUsage, res.ResetTime*1e6, res.LaunchTime*1e6, res.SyncTime*1e6, res.VerifyTime*1e6)

	spec1 := base
	spec1.Specialize, spec1.SpecializeDims = true, true
	wantVerified(t, "args and dims specialized", mustRun(t, s, spec1), 5)

	bounds := base
	bounds.SetLaunchBounds, bounds.MaxThreads, bounds.MinBlocksPerSM = true, 256, 2
	wantVerified(t, "launch bounds", mustRun(t, s, bounds), 5)

	covering := base
	covering.Block, covering.Grid = dim(512), dim(n/512)
	wantVerified(t, "block 512 covering the data", mustRun(t, s, covering), 5)

	o1 := base
	o1.Passes, o1.CodegenOpt, o1.PtxasOpt, o1.MaxRegisters = "default<O1>", 1, 2, 32
	wantVerified(t, "O1, codegen 1, ptxas 2, 32 registers", mustRun(t, s, o1), 5)

	// Half the grid leaves the second half of c unwritten.
	short := base
	short.Block, short.Grid = dim(128), dim(n/256)
	res = mustRun(t, s, short)
	if res.Status != mneme.StatusFailedVerification || res.Verified || res.Failed || !res.Executed {
		t.Fatalf("uncovered data: %+v", res)
	}
	// Expected: c's first half computed, its second half still the prologue's.
	c, cEpi := prologueOf(t, s).Blobs[2], epilogueOf(t, s).Blobs[2]
	half := append(append([]byte(nil), cEpi.Data[:c.Size/2]...), c.Data[c.Size/2:]...)
	at := compare.Reference(half, cEpi.Data, 1, compare.ModeBitwise, 0, 0)
	if at < c.Size/2 || at >= c.Size/2+4 {
		t.Fatalf("test data: first difference at %d, expected in the element at %d", at, c.Size/2)
	}
	// Verification is typed by default: c is compared as the f32 the kernel
	// writes, and the message names the first failing element.
	for _, wantMsg := range []string{
		fmt.Sprintf("allocation 0x%x (%d bytes) (f32) differs from the recording", c.Addr, c.Size),
		fmt.Sprintf("at element %d:", at/4),
	} {
		if !strings.Contains(res.Mismatch, wantMsg) {
			t.Fatalf("mismatch %q does not say %q", res.Mismatch, wantMsg)
		}
	}

	// After a failed run, memory is restored in full: the baseline verifies again.
	wantVerified(t, "baseline after a failure", mustRun(t, s, base), 5)

	tooBig := base
	tooBig.Block = dim(2048)
	if res := mustRun(t, s, tooBig); res.Status != mneme.StatusInvalidConfig || !res.Failed {
		t.Fatalf("block 2048: %+v", res)
	}
	shared := base
	shared.SharedMem = uint32(max(s.Device().MaxSharedPerBlockOptin, s.Device().MaxSharedPerBlock) + 1)
	if res := mustRun(t, s, shared); res.Status != mneme.StatusInvalidLaunch || !res.Failed {
		t.Fatalf("shared memory over the limit: %+v", res)
	}
	if err := s.CheckLaunch(shared); err == nil || !strings.Contains(err.Error(), "shared memory") {
		t.Fatalf("CheckLaunch of too much shared memory: %v", err)
	}
	bigShared := base
	bigShared.SharedMem = 64 << 10 // beyond the 48 KiB default: needs the opt-in attribute
	wantVerified(t, "64 KiB dynamic shared memory", mustRun(t, s, bigShared), 5)

	out, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sameMemory(t, "output after the last run", out, epilogueOf(t, s))

	// The reset of vecadd copies only c back.
	var partial uint64
	for _, r := range s.partial {
		partial += r.Size
	}
	if partial != c.Size {
		t.Fatalf("partial reset copies %d bytes, c is %d", partial, c.Size)
	}
}

// axpyLaunch is y = a*x + y over n floats, in place, as one recorded launch.
func axpyLaunch(n int) *fixture.Launch {
	return &fixture.Launch{
		Kernel: "axpy", Grid: dim(uint32((n + 255) / 256)), Block: dim(256),
		Args: []fixture.Arg{fixture.F32("a", 1.5), fixture.Ptr("x", 0), fixture.Ptr("y", 1), fixture.I32("n", int32(n))},
		Buffers: [][]byte{
			f32buf(n, func(i int) float32 { return float32(i % 101) }),
			f32buf(n, func(i int) float32 { return float32(i%13) * 0.25 }),
		},
	}
}

func TestGPUInPlaceUpdateIsResetBeforeEveryIteration(t *testing.T) {
	dir := recordOnGPU(t, axpyLaunch(300_000))
	for _, full := range []bool{false, true} {
		s := openSession(t, dir, Options{Iterations: 20, Warmup: 3, FullReset: full})
		for _, cfg := range []mneme.Config{s.Baseline(), func() mneme.Config {
			c := s.Baseline()
			c.Specialize, c.SpecializeDims = true, true
			return c
		}()} {
			res := mustRun(t, s, cfg)
			wantVerified(t, "axpy", res, 20)
			// 24 launches ran; y holds one update only if each started from the prologue.
			out, err := s.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			sameMemory(t, "axpy after 24 launches", out, epilogueOf(t, s))
		}
		s.Close()
		// The device memory is gone: reading it must fail, not touch freed memory.
		if _, err := s.Snapshot(); err == nil {
			t.Fatal("Snapshot after Close succeeded")
		}
	}
}

// With ColdL2 the L2 cache is evicted after each reset: the kernel still
// starts from the prologue every time and verifies; its time is then that
// of inputs read from device memory (logged beside the warm figure).
func TestGPUColdL2ReplayVerifies(t *testing.T) {
	dir := recordOnGPU(t, axpyLaunch(4<<20)) // 2 x 16 MiB: fits the L2 of current GPUs when warm
	medians := map[bool]float64{}
	for _, cold := range []bool{false, true} {
		s := openSession(t, dir, Options{Iterations: 20, Warmup: 3, ColdL2: cold})
		res := mustRun(t, s, s.Baseline())
		wantVerified(t, "axpy", res, 20)
		out, err := s.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		sameMemory(t, "axpy after 23 launches", out, epilogueOf(t, s))
		times := slices.Clone(res.ExecTime)
		slices.Sort(times)
		medians[cold] = times[len(times)/2]
		s.Close()
	}
	t.Logf("axpy on 2 x 16 MiB: median %.0f ns with a warm L2, %.0f ns cold", medians[false], medians[true])
}

func TestGPUDeviceGlobals(t *testing.T) {
	const n = 4096
	l := &fixture.Launch{
		Kernel: "scale_global", Grid: dim(n / 128), Block: dim(128),
		Args:    []fixture.Arg{fixture.Ptr("y", 0), fixture.I32("n", n)},
		Buffers: [][]byte{f32buf(n, func(i int) float32 { return float32(i) })},
		Globals: []fixture.Global{
			{Name: "g_scale", Data: binary.LittleEndian.AppendUint32(nil, math.Float32bits(2.5))},
			{Name: "g_count", Data: make([]byte, 4)},
		},
	}
	dir := recordOnGPU(t, l)
	s := openSession(t, dir, Options{Iterations: 7, Warmup: 2})
	for _, cfg := range []mneme.Config{s.Baseline(), func() mneme.Config { c := s.Baseline(); c.Specialize = true; return c }()} {
		res := mustRun(t, s, cfg)
		wantVerified(t, "globals", res, 7)
		out, err := s.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		// g_count counts the threads of one launch, not of all ten.
		sameMemory(t, "globals after ten launches", out, epilogueOf(t, s))
	}
	// Verification covers globals: launching half the threads leaves g_count short.
	half := s.Baseline()
	half.Grid = dim(n / 256)
	res := mustRun(t, s, half)
	if res.Status != mneme.StatusFailedVerification || !strings.Contains(res.Mismatch, "allocation") && !strings.Contains(res.Mismatch, "g_count") {
		t.Fatalf("half grid: %+v", res)
	}
}

func TestGPUDevicePointersInData(t *testing.T) {
	const rows, perRow = 512, 37
	data := f32buf(rows*perRow, func(i int) float32 { return float32(i%17) * 0.5 })
	l := &fixture.Launch{
		Kernel: "row_sums", Grid: dim(rows / 128), Block: dim(128),
		Args:    []fixture.Arg{fixture.Ptr("rows", 0), fixture.Ptr("out", 1), fixture.I32("nrows", rows)},
		Buffers: [][]byte{make([]byte, 16*rows), make([]byte, 4*rows), data},
		// Each row points into the data buffer: pointers stored in device memory.
		Fill: func(addrs []uint64, bufs [][]byte) {
			for r := 0; r < rows; r++ {
				binary.LittleEndian.PutUint64(bufs[0][16*r:], addrs[2]+uint64(4*perRow*r))
				binary.LittleEndian.PutUint32(bufs[0][16*r+8:], perRow)
			}
		},
	}
	dir := recordOnGPU(t, l)
	s := openSession(t, dir, Options{Iterations: 3})
	res := mustRun(t, s, s.Baseline())
	wantVerified(t, "row sums through stored pointers", res, 3)
	out := epilogueOf(t, s).Blobs[1].Data
	if f32at(out, 1) == 0 {
		t.Fatal("the recording itself computed nothing")
	}
}

func TestGPUToleranceVerification(t *testing.T) {
	dir := recordOnGPU(t, vecaddLaunch(1<<16))
	for _, v := range []mneme.VerifyOptions{{Mode: mneme.VerifyAbs, Tolerance: 1e-6}, {Mode: mneme.VerifyRel, Tolerance: 1e-6}, {Mode: mneme.VerifyTolerance, ATol: 1e-6, RTol: 1e-6}} {
		s := openSession(t, dir, Options{Iterations: 2, Verify: v})
		wantVerified(t, v.Mode, mustRun(t, s, s.Baseline()), 2)
		short := s.Baseline()
		short.Grid = dim(short.Grid.X / 2)
		if res := mustRun(t, s, short); res.Status != mneme.StatusFailedVerification {
			t.Fatalf("%s: uncovered data: %+v", v.Mode, res)
		}
		wantVerified(t, v.Mode+" after a failure", mustRun(t, s, s.Baseline()), 2)
		s.Close()
	}
}

// The comparison kernel agrees with its host reference on random data with
// planted differences, in every mode and element width.
func TestGPUCompareKernelMatchesReference(t *testing.T) {
	dir := recordOnGPU(t, vecaddLaunch(1<<10))
	s := openSession(t, dir, Options{})
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := s.ctx.SetCurrent(); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	const size = 1<<20 + 13
	want := f32buf(size/4+1, func(i int) float32 { return float32(rng.NormFloat64()) })[:size]
	dGot, err := cuda.MemAlloc(size)
	if err != nil {
		t.Fatal(err)
	}
	defer cuda.MemFree(dGot)
	dWant, err := cuda.MemAlloc(size)
	if err != nil {
		t.Fatal(err)
	}
	defer cuda.MemFree(dWant)
	if err := cuda.MemcpyHtoD(dWant, want); err != nil {
		t.Fatal(err)
	}
	for trial := 0; trial < 12; trial++ {
		got := append([]byte(nil), want...)
		for k := 0; k < trial%4; k++ {
			i := rng.IntN(size/4) * 4
			v := f32at(got, i/4) * (1 + float32(rng.NormFloat64())*1e-3)
			binary.LittleEndian.PutUint32(got[i:], math.Float32bits(v))
		}
		if trial%5 == 4 {
			got[size-1] ^= 1 // the byte tail past the last element
		}
		if err := cuda.MemcpyHtoD(dGot, got); err != nil {
			t.Fatal(err)
		}
		for _, m := range []struct {
			elem, mode uint32
			atol, rtol float64
		}{{1, compare.ModeBitwise, 0, 0}, {4, compare.ModeBitwise, 0, 0}, {8, compare.ModeBitwise, 0, 0},
			{4, compare.ModeTolerance, 0, 1e-4}, {4, compare.ModeTolerance, 1e-3, 0}, {8, compare.ModeTolerance, 0, 1e-9}} {
			p := compare.Params{Got: dGot, Want: dWant, N: size, Elem: m.elem, Mode: m.mode, ATol: m.atol, RTol: m.rtol, Result: s.results}
			if err := cuda.MemsetD8(s.results, 0xff, 8); err != nil {
				t.Fatal(err)
			}
			if err := s.cmpFn.Launch(dim(264), dim(compareThreads), 0, s.stream, p.Args()); err != nil {
				t.Fatal(err)
			}
			if err := s.stream.Synchronize(); err != nil {
				t.Fatal(err)
			}
			word := make([]byte, 8)
			if err := cuda.MemcpyDtoH(word, s.results); err != nil {
				t.Fatal(err)
			}
			gpu := binary.LittleEndian.Uint64(word)
			host := compare.Reference(got, want, m.elem, m.mode, m.atol, m.rtol)
			if gpu != host {
				t.Fatalf("trial %d elem %d mode %d: GPU says %d, reference %d", trial, m.elem, m.mode, gpu, host)
			}
		}
	}
}

// A configuration that traps breaks the context; that must happen in a
// process of its own, so the test runs itself as a child.
func TestGPUFaultingConfiguration(t *testing.T) {
	needGPU(t)
	testIR(t)
	if os.Getenv("MNEME_REPLAY_FAULT_CHILD") == "1" {
		faultChild(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestGPUFaultingConfiguration$", "-test.v")
	cmd.Env = append(os.Environ(), "MNEME_REPLAY_FAULT_CHILD=1")
	out, err := cmd.CombinedOutput()
	t.Logf("child:\n%s", out)
	if err != nil {
		t.Fatalf("the faulting replay's process failed: %v", err)
	}
	if !bytes.Contains(out, []byte("fault reported: ")) {
		t.Fatal("the child did not reach the fault")
	}
}

func faultChild(t *testing.T) {
	const n = 1 << 14
	l := &fixture.Launch{
		Kernel: "trap_big_blocks", Grid: dim(n / 256), Block: dim(256),
		Args:    []fixture.Arg{fixture.Ptr("y", 0), fixture.I32("n", n), fixture.I32("limit", 256)},
		Buffers: [][]byte{f32buf(n, func(i int) float32 { return float32(i) })},
	}
	dir := recordOnGPU(t, l)
	s := openSession(t, dir, Options{Iterations: 3})
	wantVerified(t, "baseline", mustRun(t, s, s.Baseline()), 3)
	trap := s.Baseline()
	trap.Block, trap.Grid = dim(512), dim(n/512)
	res, err := s.Run(trap)
	if err != nil {
		t.Fatalf("a kernel fault is not an internal error: %v", err)
	}
	if !res.Failed || res.Status != mneme.StatusRuntimeError || res.Error == "" || res.Verified {
		t.Fatalf("trap: %+v", res)
	}
	if !s.Broken() {
		t.Fatal("a trap leaves the context unusable, but the session does not say so")
	}
	if _, err := s.Run(s.Baseline()); !errors.Is(err, ErrBroken) {
		t.Fatalf("Run after the fault: %v, want ErrBroken", err)
	}
	t.Logf("fault reported: %s", res.Error)
}

// Typed verification: a float output a few ULP off the recording passes in
// mode auto with its figures, fails bitwise, and fails a tighter ulp bound.
func TestGPUTypedVerification(t *testing.T) {
	needGPU(t)
	const n = 1 << 16
	off := []int{5, 700, 60000}
	nudged := func(ulps int) func([][]byte) {
		return func(bufs [][]byte) {
			vecaddHost(bufs)
			for _, i := range off {
				v := f32at(bufs[2], i)
				for range ulps {
					v = math.Nextafter32(v, float32(math.Inf(1)))
				}
				binary.LittleEndian.PutUint32(bufs[2][4*i:], math.Float32bits(v))
			}
		}
	}
	dir, _ := hostDB(t, vecaddLaunch(n), nudged(2))
	s := openSession(t, dir, Options{Iterations: 2})
	res := mustRun(t, s, s.Baseline())
	wantVerified(t, "auto, 2 ulp off", res, 2)
	if len(res.Verification) != 1 {
		t.Fatalf("figures for %d buffers, want c only: %+v", len(res.Verification), res.Verification)
	}
	f := res.Verification[0]
	if f.Type != "f32" || !f.Passed || f.Differing != 3 || f.Failing != 0 || f.MaxULP != 2 || f.FirstIndex == nil || *f.FirstIndex != 5 || f.Elements != n {
		t.Fatalf("figures %+v", f)
	}
	if !strings.Contains(f.Buffer, "(arg 2)") {
		t.Errorf("buffer name %q does not name arg 2", f.Buffer)
	}
	wantVerified(t, "auto again, partial reset", mustRun(t, s, s.Baseline()), 2)
	s.Close()

	for _, v := range []mneme.VerifyOptions{{Mode: mneme.VerifyBitwise}, {Mode: mneme.VerifyULP, ULP: 1}} {
		s := openSession(t, dir, Options{Iterations: 2, Verify: v})
		res := mustRun(t, s, s.Baseline())
		if res.Status != mneme.StatusFailedVerification || !strings.Contains(res.Mismatch, "allocation") {
			t.Fatalf("%+v: %s: %s", v, res.Status, res.Mismatch)
		}
		if v.Mode == mneme.VerifyULP && (len(res.Verification) != 1 || res.Verification[0].Failing != 3 || *res.Verification[0].FirstIndex != 5) {
			t.Fatalf("ulp 1 figures: %+v", res.Verification)
		}
		s.Close()
	}

	far, _ := hostDB(t, vecaddLaunch(n), nudged(1000))
	s = openSession(t, far, Options{Iterations: 2})
	res = mustRun(t, s, s.Baseline())
	if res.Status != mneme.StatusFailedVerification || len(res.Verification) != 1 || res.Verification[0].Failing != 3 {
		t.Fatalf("1000 ulp off under auto: %s %s %+v", res.Status, res.Mismatch, res.Verification)
	}
	t.Logf("mismatch: %s", res.Mismatch)
}

// TestGPUStreamsARecordingLargerThanItsWindows replays buffers of a dozen
// stream windows each, with zero-chunk stretches on one side only (c starts
// zero, a has a zero run): the images are restored window by window and the
// replay's output is the recording's, byte for byte.
func TestGPUStreamsARecordingLargerThanItsWindows(t *testing.T) {
	const n = 12 << 20 // 48 MiB per buffer
	l := vecaddLaunch(n)
	l.Buffers[2] = make([]byte, 4*n)
	copy(l.Buffers[0][8<<20:], make([]byte, 8<<20))
	dir := recordOnGPU(t, l)
	s := openSession(t, dir, Options{Iterations: 3})
	wantVerified(t, "vecadd of 48 MiB buffers", mustRun(t, s, s.Baseline()), 3)
	out, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sameMemory(t, "output of the streamed recording", out, epilogueOf(t, s))
	// Only c changed: the partial reset restores it and nothing else.
	c := s.rec.Prologue.Blobs[2]
	for _, r := range s.partial {
		if r.Dst < c.Addr || r.Dst+r.Size > c.Addr+c.Size {
			t.Fatalf("partial reset of 0x%x+%d lies outside c (0x%x+%d)", r.Dst, r.Size, c.Addr, c.Size)
		}
	}
}

// TestGPURecordingLargerThanTheDeviceIsOutOfResources plants a pair of
// snapshots whose one allocation takes three quarters of the recording
// device (allowed by the recording's limits): with its two device images it
// cannot fit, and the session says so up front, naming the snapshot, within
// a second, without a host buffer of that size.
func TestGPURecordingLargerThanTheDeviceIsOutOfResources(t *testing.T) {
	dir := recordOnGPU(t, vecaddLaunch(1000))
	d, err := db.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	k := d.Kernels[0]
	inst := k.Instances[k.InstanceIDs()[0]]
	base, err := k.ParseVAddr()
	if err != nil {
		t.Fatal(err)
	}
	size := k.Device.TotalMem / 4 * 3 / (64 << 20) * (64 << 20)
	bomb := &db.Snapshot{Blobs: []db.Blob{{Addr: base, Size: size, Chunks: func(int) (db.SourceChunk, error) { return db.SourceChunk{Zero: true}, nil }}}}
	for _, name := range []string{inst.Prologue, inst.Epilogue} {
		n, err := db.WriteSnapshot(filepath.Join(dir, name), bomb, db.SnapshotOptions{ChunkSize: 64 << 20, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		inst.PrologueBytes, inst.EpilogueBytes = uint64(n), uint64(n)
	}
	k.VASize = max(k.VASize, size)
	if err := db.WriteKernel(dir, k); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = Open(Options{DB: dir})
	if !errors.Is(err, mneme.ErrOutOfResources) || !strings.Contains(err.Error(), inst.Prologue) || !strings.Contains(err.Error(), "needs") {
		t.Fatalf("a recording three devices' worth of memory cannot hold: %v", err)
	}
	t.Logf("refused in %v: %v", time.Since(start), err)
}
