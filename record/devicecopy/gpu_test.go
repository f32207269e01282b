package devicecopy

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/cuda"
	"github.com/mneme-gpu/mneme/internal/gputest"
	"github.com/mneme-gpu/mneme/record"
	"github.com/mneme-gpu/mneme/record/fingerprint"
)

var (
	gpuOnce sync.Once
	gpuErr  error
)

// gpu makes device 0's primary context current, or skips without a driver.
func gpu(tb testing.TB) {
	tb.Helper()
	gputest.Need(tb, cuda.Init())
	gpuOnce.Do(func() {
		d, err := cuda.GetDevice(0)
		if err != nil {
			gpuErr = err
			return
		}
		ctx, err := d.RetainPrimaryContext()
		if err != nil {
			gpuErr = err
			return
		}
		gpuErr = ctx.SetCurrent()
	})
	gputest.Need(tb, gpuErr)
}

// deviceData allocates n bytes on the device holding host's bytes.
func deviceData(t *testing.T, host []byte) uint64 {
	t.Helper()
	addr, err := cuda.MemAlloc(uint64(len(host)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cuda.MemFree(addr) })
	if err := cuda.MemcpyHtoD(addr, host); err != nil {
		t.Fatal(err)
	}
	return addr
}

func random(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// The GPU kernel computes exactly the Go reference's fingerprints, on whole
// chunks, tails of every length, zero chunks and one-word changes.
func TestGPUFingerprintsMatchTheReference(t *testing.T) {
	gpu(t)
	const mib = 1 << 20
	host := random(4*mib+64, 1)
	clear(host[mib : 2*mib]) // a zero chunk
	addr := deviceData(t, host)
	var rs []fingerprint.Range
	rs = append(rs, fingerprint.Range{Addr: addr, Len: mib}, fingerprint.Range{Addr: addr + mib, Len: mib}, fingerprint.Range{Addr: addr + 2*mib, Len: mib})
	for n := uint64(1); n <= 17; n++ {
		rs = append(rs, fingerprint.Range{Addr: addr + 3*mib, Len: n}, fingerprint.Range{Addr: addr + 3*mib + 8, Len: 4096 + n})
	}
	rs = append(rs, fingerprint.Range{Addr: addr + 3*mib, Len: mib + 64})
	r := New(8 * mib)
	defer r.Close()
	sums := referenceFingerprints(t, r, rs, addr, host)
	if !sums[1].Zero || sums[0].Zero {
		t.Errorf("zero flags: %v %v", sums[0].Zero, sums[1].Zero)
	}
	// One word changed on the device changes the fingerprint.
	if err := cuda.MemsetD8(addr+12345*8, 0x5a, 8); err != nil {
		t.Fatal(err)
	}
	again, err := r.Fingerprints(rs[:1])
	if err != nil {
		t.Fatal(err)
	}
	if again[0].A == sums[0].A || again[0].B == sums[0].B {
		t.Error("a changed word left the fingerprint as it was")
	}
}

// referenceFingerprints returns r's fingerprints of rs, checking each
// against the Go reference over host, the bytes the device holds at addr.
func referenceFingerprints(t *testing.T, r *Reader, rs []fingerprint.Range, addr uint64, host []byte) []fingerprint.Sum {
	t.Helper()
	sums, err := r.Fingerprints(rs)
	if err != nil {
		t.Fatal(err)
	}
	for i, rg := range rs {
		off := rg.Addr - addr
		if want := fingerprint.Chunk(host[off : off+rg.Len]); sums[i] != want {
			t.Errorf("range %d (%d bytes at +%#x): GPU %+v, reference %+v", i, rg.Len, off, sums[i], want)
		}
	}
	return sums
}

// A kernel Prepare loads in the background serves Fingerprints (which
// waits for a load in progress), and a reader closed before its kernel
// loads does not load it afterwards.
func TestGPUPreparedFingerprintKernel(t *testing.T) {
	gpu(t)
	host := random(3<<20, 9)
	addr := deviceData(t, host)
	rs := []fingerprint.Range{{Addr: addr, Len: 1 << 20}, {Addr: addr + 1<<20, Len: 2 << 20}}
	r := New(8 << 20)
	r.Prepare()
	referenceFingerprints(t, r, rs, addr, host)
	// On a GPU of a family the fatbin holds a cubin for, the kernel must
	// come from it: nothing is compiled, on a fresh machine or with the
	// driver's cache off.
	d, err := cuda.GetDevice(0)
	if err != nil {
		t.Fatal(err)
	}
	props, err := d.Props()
	if err != nil {
		t.Fatal(err)
	}
	family := fmt.Sprintf("sm_%d0", props.Major)
	if strings.Contains(fingerprintCubins(t), " "+family) && r.kernelFrom != "fatbin" {
		t.Errorf("on %s (%s cubin in the fatbin) the kernel was loaded from its %s", props.Arch(), family, r.kernelFrom)
	}
	t.Logf("%s: fingerprint kernel loaded from its %s", props.Arch(), r.kernelFrom)
	r.Close()
	if r.mod != nil || r.fn != nil {
		t.Error("Close left the fingerprint kernel loaded")
	}

	closed := New(8 << 20)
	closed.Close()
	if err := closed.loadKernel(); err == nil {
		t.Error("a closed reader loaded its fingerprint kernel")
	}
	closed.Prepare()
	time.Sleep(100 * time.Millisecond)
	closed.kernelMu.Lock()
	loaded := closed.mod != nil
	closed.kernelMu.Unlock()
	if loaded {
		t.Error("Prepare loaded the kernel of a closed reader")
	}
}

// Staged copies deliver every run's bytes in order, whether the reader
// hands runs back at once or holds them (more runs than slots, and a hold
// of every slot, which the spare path must serve without waiting).
func TestGPUStagedCopiesDeliverEveryRun(t *testing.T) {
	gpu(t)
	const slot = 1 << 20
	host := random(64*slot, 7)
	addr := deviceData(t, host)
	var runs []fingerprint.Range
	for off := uint64(0); off < uint64(len(host)); {
		n := min(uint64(slot)-(off%4096), uint64(len(host))-off)
		runs = append(runs, fingerprint.Range{Addr: addr + off, Len: n})
		off += n
	}
	r := New(slot)
	defer r.Close()
	for _, hold := range []int{0, 3, len(runs)} {
		stats, _ := stageHolding(t, r, runs, addr, host, hold)
		if stats.Bytes != int64(len(host)) || stats.TransferSeconds <= 0 {
			t.Errorf("hold %d: stats %+v, want %d bytes and a transfer time", hold, stats, len(host))
		}
	}
	if _, err := r.Stage([]fingerprint.Range{{Addr: addr, Len: slot + 1}}); err == nil {
		t.Error("a run larger than the staging buffers was accepted")
	}
}

// stageHolding stages runs from the device and checks them (checkStaged),
// releasing each once hold later runs have arrived, as the snapshot writer
// holds its window; it returns the copy stats and how many runs went on the
// spare path.
func stageHolding(t *testing.T, r *Reader, runs []fingerprint.Range, addr uint64, host []byte, hold int) (record.CopyStats, int) {
	t.Helper()
	st, err := r.Stage(runs)
	if err != nil {
		t.Fatal(err)
	}
	return checkStaged(t, fmt.Sprintf("hold %d", hold), st, runs, addr, host, hold)
}

// checkStaged waits for each of st's runs in turn, checks its bytes against
// host (what the device held at addr), releases it once hold later runs
// have arrived, and closes st, returning its copy stats and how many runs
// went on the spare path.
func checkStaged(t *testing.T, what string, st record.Staging, runs []fingerprint.Range, addr uint64, host []byte, hold int) (record.CopyStats, int) {
	t.Helper()
	s, _ := st.(*staging)
	var held []int
	spare := 0
	for i, run := range runs {
		data, err := st.Wait(i)
		if err != nil {
			t.Errorf("%s: run %d: %v", what, i, err)
			break
		}
		if s != nil && s.slotOf[i] == spareRun {
			spare++
		}
		off := run.Addr - addr
		if !bytes.Equal(data, host[off:off+run.Len]) {
			t.Errorf("%s: run %d does not hold the device's bytes", what, i)
		}
		held = append(held, i)
		for len(held) > hold {
			st.Release(held[0])
			held = held[1:]
		}
	}
	for _, i := range held {
		st.Release(i)
	}
	return st.Close(), spare
}

// Short runs (changed chunks scattered between stored ones) share slots:
// with the writer holding a window of 32 runs, as it holds 32 chunks on 16
// cores, none is copied on the spare path, and every run's bytes arrive.
func TestGPUShortRunsShareSlots(t *testing.T) {
	gpu(t)
	const mib = 1 << 20
	host := random(64*mib, 11)
	addr := deviceData(t, host)
	var runs []fingerprint.Range
	for off := uint64(0); off < 64*mib; off += mib {
		runs = append(runs, fingerprint.Range{Addr: addr + off, Len: mib / 4})
	}
	r := New(8 * mib)
	defer r.Close()
	stats, spare := stageHolding(t, r, runs, addr, host, 32)
	if spare > 0 {
		t.Errorf("%d of %d short runs were copied on the spare path (%d slots)", spare, len(runs), len(r.slots))
	}
	if stats.Bytes != int64(len(runs))*mib/4 {
		t.Errorf("stats %+v, want %d bytes", stats, len(runs)*mib/4)
	}
}

// stagedBytes stages sh's runs and checks each against host, the bytes
// the device held at addr when the shadow was made (checkStaged); it
// returns the staging's copy stats.
func stagedBytes(t *testing.T, what string, sh record.Shadow, runs []fingerprint.Range, addr uint64, host []byte) record.CopyStats {
	t.Helper()
	st, err := sh.Stage()
	if err != nil {
		t.Fatal(err)
	}
	stats, _ := checkStaged(t, what, st, runs, addr, host, 0)
	return stats
}

// A shadow, on the device or on the host, holds a copy of the runs that
// outlives changes to the source, reports the copies that made it, and is
// refused when it would eat into the reserve.
func TestGPUShadowCopiesOutliveTheSource(t *testing.T) {
	gpu(t)
	host := random(3<<20+100, 5)
	addr := deviceData(t, host)
	runs := []fingerprint.Range{{Addr: addr, Len: 1 << 20}, {Addr: addr + 2<<20, Len: 1<<20 + 100}}
	r, kept := New(8<<20), New(8<<20)
	defer r.Close()
	defer kept.Close()
	kept.KeepOnDevice(true)
	for _, kind := range []string{"device", "device, kept there", "host"} {
		if err := cuda.MemcpyHtoD(addr, host); err != nil {
			t.Fatal(err)
		}
		newShadow := map[string]func([]fingerprint.Range) (record.Shadow, error){"device": r.Shadow, "device, kept there": kept.Shadow, "host": r.HostShadow}[kind]
		sh, err := newShadow(runs)
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if err := cuda.MemsetD8(addr, 0, uint64(len(host))); err != nil {
			t.Fatal(err)
		}
		if stats := stagedBytes(t, kind+" shadow", sh, runs, addr, host); stats.Bytes != int64(runs[0].Len+runs[1].Len) || stats.TransferSeconds <= 0 {
			t.Errorf("%s shadow: copy stats %+v, want %d bytes and a transfer time", kind, stats, runs[0].Len+runs[1].Len)
		}
		sh.Free()
		if kind == "host" {
			if _, err := sh.Stage(); err == nil {
				t.Error("a freed host shadow staged its runs")
			}
		}
	}
	_, total, err := cuda.MemGetInfo()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Shadow([]fingerprint.Range{{Addr: addr, Len: total}}); err == nil {
		t.Error("a shadow as large as the GPU was made")
	}
	if _, err := r.HostShadow([]fingerprint.Range{{Addr: addr, Len: 1 << 62}}); err == nil {
		t.Error("a host shadow larger than any host was made")
	}
}

// A host shadow made while the pinned ring is held by a drain (the
// background writer's, for as long as it encodes) does not wait for the
// ring: it copies on its own and holds the same bytes.
func TestGPUHostShadowDoesNotWaitForADrain(t *testing.T) {
	gpu(t)
	host := random(3<<20+100, 11)
	addr := deviceData(t, host)
	runs := []fingerprint.Range{{Addr: addr, Len: 1 << 20}, {Addr: addr + 2<<20, Len: 1<<20 + 100}}
	r := New(8 << 20)
	defer r.Close()
	drain, err := r.Stage(runs)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan record.Shadow)
	go func() {
		sh, err := r.HostShadow(runs)
		if err != nil {
			t.Error(err)
		}
		done <- sh
	}()
	var sh record.Shadow
	select {
	case sh = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the host shadow waited for the drain holding the ring")
	}
	drain.Close()
	if sh == nil {
		return
	}
	defer sh.Free()
	if stats := stagedBytes(t, "host shadow", sh, runs, addr, host); stats.Bytes != int64(runs[0].Len+runs[1].Len) {
		t.Errorf("copy stats %+v, want %d bytes", stats, runs[0].Len+runs[1].Len)
	}
}

// spinPTX holds the device busy for a given number of nanoseconds: the
// application's queued work in the tests below.
const spinPTX = `.version 7.0
.target sm_70
.address_size 64
.visible .entry spin(.param .u64 ns)
{
	.reg .u64 %n, %t0, %t1, %d;
	.reg .pred %p;
	ld.param.u64 %n, [ns];
	mov.u64 %t0, %globaltimer;
WAIT:
	mov.u64 %t1, %globaltimer;
	sub.u64 %d, %t1, %t0;
	setp.lt.u64 %p, %d, %n;
	@%p bra WAIT;
	ret;
}
`

// busyLegacyStream queues a kernel that runs for d on the legacy default
// stream, as an application's launches do.
func busyLegacyStream(t *testing.T, d time.Duration) {
	t.Helper()
	mod, err := cuda.LoadModule([]byte(spinPTX))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cuda.Stream(0).Synchronize()
		mod.Unload()
	})
	f, err := mod.Function("spin")
	if err != nil {
		t.Fatal(err)
	}
	ns := binary.LittleEndian.AppendUint64(nil, uint64(d.Nanoseconds()))
	if err := f.Launch(mneme.Dim3{X: 1, Y: 1, Z: 1}, mneme.Dim3{X: 1, Y: 1, Z: 1}, 0, 0, [][]byte{ns}); err != nil {
		t.Fatal(err)
	}
}

// When the writer holds every slot of the ring, the next run is copied on
// its own; that copy must not wait for the kernels the application queued
// (the legacy default stream's), or a drain beside a busy application
// crawls.
func TestGPUCopyBesideAFullRingDoesNotWaitForTheApplication(t *testing.T) {
	gpu(t)
	const slot = 1 << 20
	r := New(slot)
	defer r.Close()
	n := r.nSlots + 2
	host := random(n*slot, 5)
	addr := deviceData(t, host)
	runs := slotRuns(addr, uint64(len(host)), slot)
	if err := cuda.Stream(0).Synchronize(); err != nil {
		t.Fatal(err)
	}
	st, err := r.Stage(runs)
	if err != nil {
		t.Fatal(err)
	}
	const busy = 4 * time.Second
	busyLegacyStream(t, busy)
	start := time.Now()
	for i, run := range runs { // none released: the last two find no slot
		data, err := st.Wait(i)
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		off := run.Addr - addr
		if !bytes.Equal(data, host[off:off+run.Len]) {
			t.Fatalf("run %d: wrong bytes", i)
		}
	}
	took := time.Since(start)
	for i := range runs {
		st.Release(i)
	}
	st.Close()
	if took > busy/2 {
		t.Errorf("the runs took %v to copy beside a %v kernel: the copy without a slot waited for the application", took, busy)
	}
}

// countingThrottle is a Throttle that checks the events it is given are
// live events of the context and counts how often it is turned on and off.
type countingThrottle struct {
	t       *testing.T
	on, off int
}

func (c *countingThrottle) On(events []*cuda.Event, every int) error {
	c.on++
	if len(events) != ThrottleEvents || every != ThrottleEvery {
		c.t.Errorf("throttle on with %d events every %d launches, want %d every %d", len(events), every, ThrottleEvents, ThrottleEvery)
	}
	for _, ev := range events {
		if err := ev.Record(0); err != nil {
			c.t.Fatalf("a throttle event cannot be recorded: %v", err)
		}
		if err := ev.Synchronize(); err != nil {
			c.t.Fatalf("a throttle event cannot be waited for: %v", err)
		}
	}
	return nil
}

func (c *countingThrottle) Off() { c.off++ }

// The application is throttled exactly while device shadows hold device
// memory (host shadows need no drain from the device), and a freed device
// shadow's memory goes back to the device. Here the shadows are kept on
// the device until freed.
func TestGPUDeviceShadowsThrottleTheApplication(t *testing.T) {
	gpu(t)
	const size = 256 << 20
	addr := deviceData(t, random(4<<20, 7))
	if err := cuda.MemsetD8(addr, 3, 4<<20); err != nil {
		t.Fatal(err)
	}
	big, err := cuda.MemAlloc(size)
	if err != nil {
		t.Fatal(err)
	}
	defer cuda.MemFree(big)
	r := New(8 << 20)
	r.KeepOnDevice(true)
	th := &countingThrottle{t: t}
	r.SetThrottle(th)
	freeBefore, _, err := cuda.MemGetInfo()
	if err != nil {
		t.Fatal(err)
	}
	a, err := r.Shadow([]fingerprint.Range{{Addr: big, Len: size}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.Shadow([]fingerprint.Range{{Addr: addr, Len: 4 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := r.HostShadow([]fingerprint.Range{{Addr: addr, Len: 4 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	h.Free()
	if th.on != 1 || th.off != 0 {
		t.Errorf("with two device shadows and a host shadow: throttle turned on %d times, off %d; want 1, 0", th.on, th.off)
	}
	a.Free()
	if th.off != 0 {
		t.Error("the throttle was turned off while a device shadow remained")
	}
	freeAfter, _, err := cuda.MemGetInfo()
	if err != nil {
		t.Fatal(err)
	}
	// Allocation granularity and the 4 MiB shadow still held: within 64 MiB.
	if freeAfter+64<<20 < freeBefore {
		t.Errorf("%d bytes free before a %d-byte shadow, %d after it was freed: the memory did not go back", freeBefore, size, freeAfter)
	}
	b.Free()
	if th.on != 1 || th.off != 1 {
		t.Errorf("after every device shadow was freed: throttle turned on %d times, off %d; want 1, 1", th.on, th.off)
	}
	c, err := r.Shadow([]fingerprint.Range{{Addr: addr, Len: 4 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	c.Free()
	r.Close()
	if th.on != 2 || th.off != 2 {
		t.Errorf("after a second device shadow and Close: throttle turned on %d times, off %d; want 2, 2", th.on, th.off)
	}
}

// A device shadow moves into host memory on its own: its device memory
// goes back and the throttle comes off once it has landed, before the
// writer is done with it, and what it hands over is what the device held.
// One of SettleMaxBytes stays on the device until freed.
func TestGPUDeviceShadowSettlesIntoHostMemory(t *testing.T) {
	gpu(t)
	const size = SettleMaxBytes / 2
	host := random(size, 13)
	addr := deviceData(t, host)
	r := New(8 << 20)
	defer r.Close()
	th := &countingThrottle{t: t}
	r.SetThrottle(th)
	freeBefore, _, err := cuda.MemGetInfo()
	if err != nil {
		t.Fatal(err)
	}
	runs := slotRuns(addr, size, 8<<20)
	sh, err := r.Shadow(runs)
	if err != nil {
		t.Fatal(err)
	}
	if err := cuda.MemsetD8(addr, 0, size); err != nil {
		t.Fatal(err)
	}
	stats := stagedBytes(t, "settled shadow", sh, runs, addr, host) // Close waits for the settle to end
	if stats.Bytes != size || stats.TransferSeconds <= 0 {
		t.Errorf("copy stats %+v, want %d bytes and a transfer time", stats, size)
	}
	freeAfter, _, err := cuda.MemGetInfo()
	if err != nil {
		t.Fatal(err)
	}
	if th.on != 1 || th.off != 1 {
		t.Errorf("settled, not yet freed: throttle turned on %d times, off %d; want 1, 1", th.on, th.off)
	}
	if freeAfter+64<<20 < freeBefore {
		t.Errorf("%d bytes free before the shadow, %d once it settled: its device memory did not go back", freeBefore, freeAfter)
	}
	sh.Free()
	if freed, err := sh.Stage(); err == nil {
		if _, err := freed.Wait(0); err == nil {
			t.Error("a freed shadow's staging still handed over its bytes")
		}
	}

	big, err := cuda.MemAlloc(SettleMaxBytes)
	if err != nil {
		t.Fatal(err)
	}
	defer cuda.MemFree(big)
	bigRuns := slotRuns(big, SettleMaxBytes, 8<<20)
	large, err := r.Shadow(bigRuns)
	if err != nil {
		t.Fatal(err)
	}
	st, err := large.Stage()
	if err != nil {
		t.Fatal(err)
	}
	for i := range bigRuns {
		if _, err := st.Wait(i); err != nil {
			t.Fatal(err)
		}
		st.Release(i)
	}
	st.Close()
	if th.on != 2 || th.off != 1 {
		t.Errorf("a large shadow staged, not yet freed: throttle turned on %d times, off %d; want 2, 1 (it stays on the device)", th.on, th.off)
	}
	large.Free()
	if th.off != 2 {
		t.Errorf("a large shadow freed: throttle turned off %d times, want 2", th.off)
	}
}

// BenchmarkGPUStagedCopy reports the staged copy rate of 1 GiB next to one
// large copy into pinned memory (the bus's practical limit).
func BenchmarkGPUStagedCopy(b *testing.B) {
	gpu(b)
	const total = 1 << 30
	addr, runs := benchRuns(b, total, 8<<20)
	pinned, err := cuda.MemAllocHost(total)
	if err != nil {
		b.Fatal(err)
	}
	defer pinned.Free()
	r := New(8 << 20)
	defer r.Close()
	var pinnedSec, stagedSec, transferSec float64
	b.SetBytes(total)
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if err := cuda.MemcpyDtoH(pinned.Bytes(), addr); err != nil {
			b.Fatal(err)
		}
		pinnedSec += time.Since(start).Seconds()
		start = time.Now()
		st, err := r.Stage(runs)
		if err != nil {
			b.Fatal(err)
		}
		for k := range runs {
			if _, err := st.Wait(k); err != nil {
				b.Fatal(err)
			}
			st.Release(k)
		}
		stats := st.Close()
		stagedSec += time.Since(start).Seconds()
		transferSec += stats.TransferSeconds
	}
	n := float64(b.N) * total / 1e9
	b.ReportMetric(n/pinnedSec, "pinned-GB/s")
	b.ReportMetric(n/stagedSec, "staged-GB/s")
	b.ReportMetric(n/transferSec, "transfer-GB/s")
}

// BenchmarkGPUHostShadow reports the rate at which 1 GiB of device memory
// becomes a host shadow: what an application waits for when a snapshot is
// written in the background from host memory.
func BenchmarkGPUHostShadow(b *testing.B) {
	gpu(b)
	const total = 1 << 30
	_, runs := benchRuns(b, total, 8<<20)
	r := New(8 << 20)
	defer r.Close()
	b.SetBytes(total)
	var sec float64
	for i := 0; i < b.N; i++ {
		start := time.Now()
		sh, err := r.HostShadow(runs)
		if err != nil {
			b.Fatal(err)
		}
		sec += time.Since(start).Seconds()
		sh.Free()
	}
	b.ReportMetric(float64(b.N)*total/1e9/sec, "host-shadow-GB/s")
}

// benchRuns allocates total bytes of device memory filled with ones, freed
// when the benchmark ends, and splits it into runs of slot bytes.
// BenchmarkGPUShadowDrain reports the transfer rate of a large device
// shadow drained through the ring by a consumer that takes its time, as
// the writer does (a pause per 1 MiB chunk, as a 16-core encoder takes at
// 4 GB/s), next to the same staged copies of live memory.
func BenchmarkGPUShadowDrain(b *testing.B) {
	gpu(b)
	const total = 1 << 30
	_, runs := benchRuns(b, total, 8<<20)
	r := New(8 << 20)
	defer r.Close()
	drain := func(st record.Staging) record.CopyStats {
		for k := range runs {
			if _, err := st.Wait(k); err != nil {
				b.Fatal(err)
			}
			time.Sleep(8 * 250 * time.Microsecond / 16)
			st.Release(k)
		}
		return st.Close()
	}
	var liveSec, shadowSec float64
	b.SetBytes(total)
	for i := 0; i < b.N; i++ {
		st, err := r.Stage(runs)
		if err != nil {
			b.Fatal(err)
		}
		liveSec += drain(st).TransferSeconds
		sh, err := r.Shadow(runs)
		if err != nil {
			b.Fatal(err)
		}
		if st, err = sh.Stage(); err != nil {
			b.Fatal(err)
		}
		shadowSec += drain(st).TransferSeconds
		sh.Free()
	}
	n := float64(b.N) * total / 1e9
	b.ReportMetric(n/liveSec, "live-transfer-GB/s")
	b.ReportMetric(n/shadowSec, "shadow-transfer-GB/s")
}

func benchRuns(b *testing.B, total, slot uint64) (uint64, []fingerprint.Range) {
	addr, err := cuda.MemAlloc(total)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cuda.MemFree(addr) })
	if err := cuda.MemsetD8(addr, 1, total); err != nil {
		b.Fatal(err)
	}
	return addr, slotRuns(addr, total, slot)
}

// slotRuns cuts total bytes at addr into runs of slot bytes (total is a
// multiple of slot).
func slotRuns(addr, total, slot uint64) []fingerprint.Range {
	var runs []fingerprint.Range
	for off := uint64(0); off < total; off += slot {
		runs = append(runs, fingerprint.Range{Addr: addr + off, Len: slot})
	}
	return runs
}

// fingerprintCubins is the fatbin manifest's line naming its cubins.
func fingerprintCubins(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../fingerprint/fingerprint.fatbin.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "cubins ") {
			return line
		}
	}
	t.Fatal("fingerprint.fatbin.txt names no cubins")
	return ""
}
