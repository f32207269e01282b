package cuda

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/internal/gputest"
)

// testPTX holds y[i] = a*x[i] + y[i] over n elements, a module global, a
// kernel that stores to the address it is given, and one that traps.
const testPTX = `.version %s
.target %s
.address_size 64

.visible .global .align 4 .u32 counter = 7;

.visible .entry saxpy(
	.param .u32 saxpy_n,
	.param .f32 saxpy_a,
	.param .u64 saxpy_x,
	.param .u64 saxpy_y
)
{
	.reg .pred %%p<2>;
	.reg .b32 %%r<6>;
	.reg .f32 %%f<5>;
	.reg .b64 %%rd<8>;

	ld.param.u32 %%r1, [saxpy_n];
	ld.param.f32 %%f1, [saxpy_a];
	ld.param.u64 %%rd1, [saxpy_x];
	ld.param.u64 %%rd2, [saxpy_y];
	mov.u32 %%r2, %%ctaid.x;
	mov.u32 %%r3, %%ntid.x;
	mov.u32 %%r4, %%tid.x;
	mad.lo.s32 %%r5, %%r2, %%r3, %%r4;
	setp.ge.u32 %%p1, %%r5, %%r1;
	@%%p1 bra DONE;
	cvta.to.global.u64 %%rd3, %%rd1;
	cvta.to.global.u64 %%rd4, %%rd2;
	mul.wide.u32 %%rd5, %%r5, 4;
	add.s64 %%rd6, %%rd3, %%rd5;
	add.s64 %%rd7, %%rd4, %%rd5;
	ld.global.f32 %%f2, [%%rd6];
	ld.global.f32 %%f3, [%%rd7];
	fma.rn.f32 %%f4, %%f1, %%f2, %%f3;
	st.global.f32 [%%rd7], %%f4;
DONE:
	ret;
}

.visible .entry poke(.param .u64 poke_p)
{
	.reg .b64 %%rd<2>;
	.reg .b32 %%r<2>;
	ld.param.u64 %%rd1, [poke_p];
	mov.u32 %%r1, 42;
	st.global.u32 [%%rd1], %%r1;
	ret;
}

.visible .entry halt()
{
	trap;
	ret;
}
`

var (
	gpuOnce  sync.Once
	gpuCtx   *Context
	gpuProps DeviceProps
	gpuErr   error
)

// gpu makes device 0's primary context current for the test, or skips
// when this machine has no CUDA driver (gputest.Need).
func gpu(tb testing.TB) DeviceProps {
	tb.Helper()
	gputest.Need(tb, Init())
	gpuOnce.Do(func() {
		var d Device
		if d, gpuErr = GetDevice(0); gpuErr != nil {
			return
		}
		if gpuProps, gpuErr = d.Props(); gpuErr != nil {
			return
		}
		if gpuCtx, gpuErr = d.RetainPrimaryContext(); gpuErr != nil {
			return
		}
		gpuErr = gpuCtx.SetCurrent()
	})
	gputest.Need(tb, gpuErr)
	return gpuProps
}

func ptxFor(p DeviceProps) []byte {
	version := "8.0"
	if p.Major >= 10 {
		version = "8.8"
	}
	return []byte(fmt.Sprintf(testPTX, version, p.Arch()))
}

func u32(v uint32) []byte  { return binary.LittleEndian.AppendUint32(nil, v) }
func f32(v float32) []byte { return u32(math.Float32bits(v)) }
func u64(v uint64) []byte  { return binary.LittleEndian.AppendUint64(nil, v) }

func floats(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func floatBytes(v []float32) []byte {
	var b []byte
	for _, f := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
	}
	return b
}

// loadTestModule links the test PTX and loads it.
func loadTestModule(tb testing.TB, p DeviceProps) (*Module, *LinkResult) {
	tb.Helper()
	res, err := LinkPTX(ptxFor(p), "mneme_test.ptx", JITOptions{OptLevel: 3})
	if err != nil {
		tb.Fatal(err)
	}
	m, err := LoadModule(res.Cubin)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { m.Unload() })
	return m, res
}

func TestGPUDeviceProps(t *testing.T) {
	p := gpu(t)
	t.Logf("%+v", p)
	if p.Name == "" || p.Major < 7 || p.SMCount <= 0 || p.TotalMem < 1<<30 {
		t.Fatalf("implausible device: %+v", p)
	}
	if p.MaxThreadsPerBlock < 1024 || p.MaxBlockDim[0] < 1024 || p.MaxGridDim[0] < 1<<30 || p.WarpSize != 32 {
		t.Fatalf("implausible limits: %+v", p)
	}
	if p.MaxSharedPerBlockOptin < p.MaxSharedPerBlock || p.SharedPerSM < p.MaxSharedPerBlock || p.RegsPerSM < p.RegsPerBlock {
		t.Fatalf("inconsistent shared/register limits: %+v", p)
	}
	if !strings.HasPrefix(p.UUID, "GPU-") || len(p.UUID) != 40 {
		t.Fatalf("UUID %q", p.UUID)
	}
	if p.Arch() != fmt.Sprintf("sm_%d%d", p.Major, p.Minor) {
		t.Fatalf("Arch %q", p.Arch())
	}
	v, err := DriverVersion()
	if err != nil || v < 12000 {
		t.Fatalf("driver version %d, %v", v, err)
	}
	n, err := DeviceCount()
	if err != nil || n < 1 {
		t.Fatalf("device count %d, %v", n, err)
	}
	if _, err := GetDevice(n); err == nil || !strings.Contains(err.Error(), "device") {
		t.Fatalf("GetDevice(%d) on a %d-device machine: %v", n, n, err)
	}
	cur, err := CurrentContext()
	if err != nil || cur.Handle() != gpuCtx.Handle() || cur.Device() != 0 {
		t.Fatalf("CurrentContext = %+v, %v; want the primary context of device 0", cur, err)
	}
	free, total, err := MemGetInfo()
	if err != nil || free == 0 || free > total || total > p.TotalMem+(p.TotalMem/100) {
		t.Fatalf("MemGetInfo = %d, %d, %v (device total %d)", free, total, err, p.TotalMem)
	}
}

func TestGPUMemoryRoundTrip(t *testing.T) {
	gpu(t)
	const n = 1 << 20
	a, err := MemAlloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer MemFree(a)
	b, err := MemAlloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer MemFree(b)
	src := make([]byte, n)
	for i := range src {
		src[i] = byte(i * 7)
	}
	if err := MemcpyHtoD(a, src); err != nil {
		t.Fatal(err)
	}
	if err := MemcpyDtoD(b, a, n); err != nil {
		t.Fatal(err)
	}
	if err := MemsetD8(b+100, 0xAB, 50); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, n)
	if err := MemcpyDtoH(got, b); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		want := src[i]
		if i >= 100 && i < 150 {
			want = 0xAB
		}
		if got[i] != want {
			t.Fatalf("byte %d = %#x, want %#x", i, got[i], want)
		}
	}
	s, err := NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	if err := MemcpyDtoDAsync(a, b, n, s); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	clear(got)
	if err := MemcpyDtoH(got, a); err != nil || got[120] != 0xAB || got[99] != src[99] {
		t.Fatalf("async copy: %v, byte 120 = %#x", err, got[120])
	}
	if managed, err := IsManaged(a); err != nil || managed {
		t.Fatalf("IsManaged(cuMemAlloc memory) = %v, %v", managed, err)
	}
	if _, err := MemAlloc(1 << 62); !IsOutOfMemory(err) || !strings.Contains(err.Error(), "cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY") {
		t.Fatalf("huge allocation: %v", err)
	}
}

func TestGPULinkLoadLaunch(t *testing.T) {
	p := gpu(t)
	m, res := loadTestModule(t, p)
	t.Logf("link %v, cubin %d bytes, options %v\n%s", res.WallTime, len(res.Cubin), res.Options, res.InfoLog)
	if len(res.Cubin) < 4 || string(res.Cubin[1:4]) != "ELF" {
		t.Fatalf("cubin is not an ELF image (%d bytes)", len(res.Cubin))
	}
	if !strings.Contains(res.InfoLog, "registers") {
		t.Fatalf("info log lacks ptxas's register report:\n%s", res.InfoLog)
	}
	stats, ok := res.Stats("saxpy")
	if !ok || stats.Registers <= 0 {
		t.Fatalf("Stats(saxpy) = %+v, %v", stats, ok)
	}
	if strings.Join(res.Options, " ") != "-O3" {
		t.Fatalf("options %v", res.Options)
	}

	f, err := m.Function("saxpy")
	if err != nil {
		t.Fatal(err)
	}
	params, err := f.ParamInfo()
	if err != nil {
		t.Fatal(err)
	}
	want := []ParamInfo{{0, 4}, {4, 4}, {8, 8}, {16, 8}}
	if fmt.Sprint(params) != fmt.Sprint(want) {
		t.Fatalf("ParamInfo = %v, want %v", params, want)
	}
	attrs, err := f.Attributes()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("attributes %+v", attrs)
	if attrs.Registers != stats.Registers || attrs.MaxThreadsPerBlock < 256 || attrs.BinaryVersion != p.Major*10+p.Minor || attrs.PTXVersion < 80 || attrs.LocalBytes != 0 {
		t.Fatalf("attributes %+v do not match ptxas %+v on %s", attrs, stats, p.Arch())
	}

	const n = 10000
	x, y := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], y[i] = float32(i), float32(2*i)
	}
	dx, _ := MemAlloc(4 * n)
	dy, _ := MemAlloc(4 * n)
	defer MemFree(dx)
	defer MemFree(dy)
	if err := MemcpyHtoD(dx, floatBytes(x)); err != nil {
		t.Fatal(err)
	}
	if err := MemcpyHtoD(dy, floatBytes(y)); err != nil {
		t.Fatal(err)
	}
	args := [][]byte{u32(n), f32(3), u64(dx), u64(dy)}
	if err := f.Launch(mneme.Dim3{X: (n + 255) / 256, Y: 1, Z: 1}, mneme.Dim3{X: 256, Y: 1, Z: 1}, 0, 0, args); err != nil {
		t.Fatal(err)
	}
	if err := Synchronize(); err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 4*n)
	if err := MemcpyDtoH(out, dy); err != nil {
		t.Fatal(err)
	}
	for i, v := range floats(out) {
		if v != 3*x[i]+y[i] {
			t.Fatalf("y[%d] = %v, want %v", i, v, 3*x[i]+y[i])
		}
	}

	// Wrong argument sizes are refused before the driver reads them.
	if err := f.Launch(mneme.Dim3{X: 1, Y: 1, Z: 1}, mneme.Dim3{X: 1, Y: 1, Z: 1}, 0, 0, [][]byte{u32(1), f32(1), u32(0), u64(dy)}); err == nil || !strings.Contains(err.Error(), "argument 2 has 4 bytes") {
		t.Fatalf("short argument: %v", err)
	}
	// An over-sized block is an invalid launch; the context survives it.
	err = f.Launch(mneme.Dim3{X: 1, Y: 1, Z: 1}, mneme.Dim3{X: 2048, Y: 1, Z: 1}, 0, 0, args)
	if !IsInvalidLaunch(err) || IsSticky(err) || IsLaunchFailure(err) {
		t.Fatalf("block of 2048 threads: %v (invalid=%v sticky=%v)", err, IsInvalidLaunch(err), IsSticky(err))
	}
	if err := f.Launch(mneme.Dim3{X: 1, Y: 1, Z: 1}, mneme.Dim3{X: 32, Y: 1, Z: 1}, 0, 0, args); err != nil {
		t.Fatalf("launch after an invalid launch: %v", err)
	}
	if err := Synchronize(); err != nil {
		t.Fatal(err)
	}

	// Module globals.
	addr, size, err := m.Global("counter")
	if err != nil || size != 4 {
		t.Fatalf("Global(counter) = %#x, %d, %v", addr, size, err)
	}
	cnt := make([]byte, 4)
	if err := MemcpyDtoH(cnt, addr); err != nil || binary.LittleEndian.Uint32(cnt) != 7 {
		t.Fatalf("counter = %v, %v; want 7", cnt, err)
	}
	if _, _, err := m.Global("nope"); !IsNotFound(err) || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("Global(nope): %v", err)
	}
	if _, err := m.Function("nope"); !IsNotFound(err) || !strings.Contains(err.Error(), `kernel "nope"`) {
		t.Fatalf("Function(nope): %v", err)
	}

	// Dynamic shared memory opt-in.
	if p.MaxSharedPerBlockOptin > 48<<10 {
		if err := f.SetMaxDynamicShared(p.MaxSharedPerBlockOptin); err != nil {
			t.Fatal(err)
		}
		if a, err := f.Attributes(); err != nil || a.MaxDynamicShared != p.MaxSharedPerBlockOptin {
			t.Fatalf("MaxDynamicShared = %d, %v; want %d", a.MaxDynamicShared, err, p.MaxSharedPerBlockOptin)
		}
	}

	// A handle from elsewhere behaves the same.
	g := FunctionFromHandle(f.Handle())
	if gp, err := g.ParamInfo(); err != nil || fmt.Sprint(gp) != fmt.Sprint(want) {
		t.Fatalf("FunctionFromHandle ParamInfo = %v, %v", gp, err)
	}
}

func TestGPULinkOptionsAndPTXModule(t *testing.T) {
	p := gpu(t)
	res, err := LinkPTX(ptxFor(p), "capped.ptx", JITOptions{OptLevel: 0, MaxRegisters: 16, Arch: p.Arch()})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(res.Options, " "); got != "-O0 --maxrregcount=16 --gpu-name="+p.Arch() {
		t.Fatalf("options %q", got)
	}
	if s, ok := res.Stats("saxpy"); !ok || s.Registers > 16 {
		t.Fatalf("register cap not applied: %+v", s)
	}
	// PTX text loads directly too (the driver JITs it).
	m, err := LoadModule(ptxFor(p))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unload()
	if _, err := m.Function("poke"); err != nil {
		t.Fatal(err)
	}
}

// Load puts a function on the GPU ahead of its first launch: afterwards
// the driver reports it loaded (a driver without cuFuncLoad reports
// neither, and its cuModuleGetFunction loads the function itself); loading
// again is harmless.
func TestGPUFunctionLoad(t *testing.T) {
	p := gpu(t)
	m, _ := loadTestModule(t, p)
	f, err := m.Function("poke")
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := f.Load()
	if err != nil {
		t.Fatal(err)
	}
	is, known, err := f.IsLoaded()
	if err != nil {
		t.Fatal(err)
	}
	if loaded != known {
		t.Errorf("cuFuncLoad present %v but cuFuncIsLoaded present %v", loaded, known)
	}
	if known && !is {
		t.Error("the function is not loaded after Load")
	}
	if again, err := f.Load(); err != nil || again != loaded {
		t.Errorf("a second Load: %v, %v", again, err)
	}
	t.Logf("driver has cuFuncLoad: %v", loaded)
}

func TestGPULinkBadPTXReportsLog(t *testing.T) {
	gpu(t)
	bad := []byte(".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k() { mov.u32 %r1, 1; ret; }\n")
	_, err := LinkPTX(bad, "bad.ptx", JITOptions{OptLevel: -1})
	var le *LinkError
	if !errors.As(err, &le) || le.Log == "" {
		t.Fatalf("want a *LinkError with the JIT log, got %v", err)
	}
	var ce *Error
	if !errors.As(err, &ce) || !strings.HasPrefix(ce.Call, "cuLink") {
		t.Fatalf("error does not name the failing cuLink call: %v", err)
	}
	t.Logf("bad PTX: %v", err)
	if !strings.Contains(err.Error(), "bad.ptx") || !strings.Contains(le.Log, "r1") {
		t.Fatalf("error lacks the file name or the log's complaint: %v", err)
	}
	if _, err := LoadModule([]byte("not a module")); err == nil {
		t.Fatal("LoadModule accepted garbage")
	}
}

func TestGPUEventAndCUPTITiming(t *testing.T) {
	p := gpu(t)
	m, _ := loadTestModule(t, p)
	f, err := m.Function("saxpy")
	if err != nil {
		t.Fatal(err)
	}
	const n = 1 << 22
	dx, _ := MemAlloc(4 * n)
	dy, _ := MemAlloc(4 * n)
	defer MemFree(dx)
	defer MemFree(dy)
	args := [][]byte{u32(n), f32(2), u64(dx), u64(dy)}
	grid, block := mneme.Dim3{X: n / 256, Y: 1, Z: 1}, mneme.Dim3{X: 256, Y: 1, Z: 1}

	// The first launch of a kernel also loads it (lazy loading); warm up.
	if err := f.Launch(grid, block, 0, 0, args); err != nil {
		t.Fatal(err)
	}
	start, _ := NewEvent()
	end, _ := NewEvent()
	defer start.Destroy()
	defer end.Destroy()
	if err := start.Record(0); err != nil {
		t.Fatal(err)
	}
	if err := f.Launch(grid, block, 0, 0, args); err != nil {
		t.Fatal(err)
	}
	if err := end.Record(0); err != nil {
		t.Fatal(err)
	}
	if err := end.Synchronize(); err != nil {
		t.Fatal(err)
	}
	d, err := Elapsed(start, end)
	if err != nil || d <= 0 {
		t.Fatalf("event time %v, %v", d, err)
	}
	t.Logf("event-timed saxpy of %d floats: %v", n, d)

	timer, err := NewKernelTimer()
	if errors.Is(err, ErrNoCUPTI) {
		gputest.Skip(t, "no CUPTI: "+err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	defer timer.Close()
	if _, err := NewKernelTimer(); err == nil {
		t.Fatal("a second KernelTimer opened while one is open")
	}
	for i := 0; i < 3; i++ {
		if err := f.Launch(grid, block, 0, 0, args); err != nil {
			t.Fatal(err)
		}
	}
	if err := Synchronize(); err != nil {
		t.Fatal(err)
	}
	recs, err := timer.Flush()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 {
		t.Fatalf("CUPTI delivered %d records, want 3: %+v", len(recs), recs)
	}
	seen := map[uint32]bool{}
	for _, r := range recs {
		t.Logf("CUPTI: %s %d ns (correlation %d)", r.Name, r.Duration(), r.CorrelationID)
		if r.Name != "saxpy" || r.End <= r.Start || r.Duration() > 1e9 || seen[r.CorrelationID] {
			t.Fatalf("bad record %+v", r)
		}
		seen[r.CorrelationID] = true
	}
	// Kernel-only time excludes launch latency, which events include, so it
	// cannot be much above the event time of the same kernel.
	if float64(recs[0].Duration()) > 1.5*float64(d.Nanoseconds()) {
		t.Fatalf("CUPTI %d ns exceeds the event time %v of the same kernel", recs[0].Duration(), d)
	}
	if again, err := timer.Flush(); err != nil || len(again) != 0 {
		t.Fatalf("second Flush = %d records, %v; want none", len(again), err)
	}
	if err := timer.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := timer.Flush(); err == nil {
		t.Fatal("Flush after Close succeeded")
	}
	reopened, err := NewKernelTimer()
	if err != nil {
		t.Fatalf("reopening after Close: %v", err)
	}
	reopened.Close()
}

// mapsAround lists the host mappings of this process that overlap
// [addr, addr+size), with the unified address space they block device
// reservations there too.
// Host memory page-locked in place takes asynchronous device-to-host
// copies, and stays the caller's, readable and writable, once unlocked.
func TestGPUHostRegister(t *testing.T) {
	gpu(t)
	const n = 4 << 20
	mem, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(mem)
	buf, err := HostRegister(mem)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := MemAlloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer MemFree(dev)
	if err := MemsetD8(dev, 0x5a, n); err != nil {
		t.Fatal(err)
	}
	s, err := NewStreamNonBlocking()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	if err := MemcpyDtoHAsync(buf.Bytes(), dev, s); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	for i, b := range mem {
		if b != 0x5a {
			t.Fatalf("byte %d of the registered memory is %#x after the copy, want 0x5a", i, b)
		}
	}
	if err := buf.Free(); err != nil {
		t.Fatal(err)
	}
	mem[0], mem[n-1] = 1, 2 // still mapped, still the caller's
	if _, err := HostRegister(nil); err == nil {
		t.Error("registering no memory succeeded")
	}
}

func mapsAround(addr, size uint64) string {
	data, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, line := range strings.Split(string(data), "\n") {
		var lo, hi uint64
		if _, err := fmt.Sscanf(line, "%x-%x", &lo, &hi); err != nil {
			continue
		}
		if lo < addr+size && hi > addr {
			b.WriteString(line + "\n")
		}
	}
	if b.Len() == 0 {
		return "(no host mapping overlaps it: the driver holds it)"
	}
	return b.String()
}

func TestGPUVirtualMemory(t *testing.T) {
	p := gpu(t)
	dev := Device(p.Ordinal)
	g, err := AllocationGranularity(dev)
	if err != nil || g == 0 || g&(g-1) != 0 {
		t.Fatalf("granularity %d, %v", g, err)
	}
	// Whether the driver honours a fixed address depends on the size: record
	// what it does for small and arena-sized reservations at both bases.
	for _, base := range []uint64{0x7f0000000000, 0x153940000000} {
		for _, sz := range []uint64{4 * g, 256 << 20, 1 << 30, 4 << 30, 16 << 30} {
			addr, err := AddressReserve(sz, base)
			if err != nil {
				t.Logf("reserve %5d MiB at %#x: %v", sz>>20, base, err)
				continue
			}
			AddressFree(addr, sz)
			t.Logf("reserve %5d MiB at %#x: exact", sz>>20, base)
		}
	}
	// An arena of Mneme's default size (4 GiB) at Mneme's base address.
	const base = 0x153940000000
	size := uint64(4 << 30)
	addr, err := AddressReserve(size, base)
	if err != nil {
		t.Fatalf("%v\n%s", err, mapsAround(base, size))
	}
	if addr != base {
		t.Fatalf("reserved at %#x, want %#x", addr, base)
	}
	defer AddressFree(addr, size)
	if _, err := AddressReserve(size, base); err == nil || !strings.Contains(err.Error(), "0x153940000000") {
		t.Fatalf("second reservation of a taken range: %v", err)
	}
	h, err := MemCreate(dev, 2*g)
	if err != nil {
		t.Fatal(err)
	}
	if err := MemMap(addr+g, 2*g, h); err != nil {
		t.Fatal(err)
	}
	if err := MemSetAccess(addr+g, 2*g, dev); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 2*g)
	for i := range data {
		data[i] = byte(i ^ (i >> 8))
	}
	if err := MemcpyHtoD(addr+g, data); err != nil {
		t.Fatal(err)
	}
	// A kernel uses the mapped memory at its fixed address.
	m, _ := loadTestModule(t, p)
	poke, _ := m.Function("poke")
	if err := poke.Launch(mneme.Dim3{X: 1, Y: 1, Z: 1}, mneme.Dim3{X: 1, Y: 1, Z: 1}, 0, 0, [][]byte{u64(addr + g + 64)}); err != nil {
		t.Fatal(err)
	}
	if err := Synchronize(); err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint32(data[64:], 42)
	got := make([]byte, 2*g)
	if err := MemcpyDtoH(got, addr+g); err != nil {
		t.Fatal(err)
	}
	if string(got) != string(data) {
		t.Fatal("mapped memory does not read back what was written")
	}
	if err := MemUnmap(addr+g, 2*g); err != nil {
		t.Fatal(err)
	}
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	if err := AddressFree(addr, size); err != nil {
		t.Fatal(err)
	}
	// Freed: the same address can be had again.
	again, err := AddressReserve(size, base)
	if err != nil {
		t.Fatalf("re-reserving after free: %v", err)
	}
	AddressFree(again, size)
}

// TestGPUKernelFaults runs each faulting kernel in a child process, because
// a fault leaves the context (and so the process) unusable.
func TestGPUKernelFaults(t *testing.T) {
	gpu(t)
	for _, c := range []string{"illegal-address", "trap"} {
		t.Run(c, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestFaultChild$", "-test.v")
			cmd.Env = append(os.Environ(), "MNEME_CUDA_FAULT_CASE="+c)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child failed: %v\n%s", err, out)
			}
			text := string(out)
			t.Logf("%s", text)
			if !strings.Contains(text, "RESULT launch-failure=true sticky=true invalid=false") {
				t.Fatalf("fault not classified as a sticky launch failure:\n%s", text)
			}
		})
	}
}

// TestFaultChild is the process TestGPUKernelFaults starts: a fault poisons
// the context, so each runs alone. Run directly, it has nothing to do.
func TestFaultChild(t *testing.T) {
	which := os.Getenv("MNEME_CUDA_FAULT_CASE")
	if which == "" {
		t.Skip("runs only as a child of TestGPUKernelFaults")
	}
	runtime.LockOSThread()
	p := gpu(t)
	m, _ := loadTestModule(t, p)
	var f *Function
	var args [][]byte
	var err error
	switch which {
	case "illegal-address":
		f, err = m.Function("poke")
		args = [][]byte{u64(8)}
	case "trap":
		f, err = m.Function("halt")
	}
	if err != nil {
		t.Fatal(err)
	}
	err = f.Launch(mneme.Dim3{X: 1, Y: 1, Z: 1}, mneme.Dim3{X: 1, Y: 1, Z: 1}, 0, 0, args)
	if err == nil {
		err = Synchronize()
	}
	if err == nil {
		t.Fatal("the faulting kernel reported no error")
	}
	fmt.Printf("RESULT launch-failure=%v sticky=%v invalid=%v err=%v\n", IsLaunchFailure(err), IsSticky(err), IsInvalidLaunch(err), err)
	// Later calls keep failing: the error is sticky.
	if _, err2 := MemAlloc(16); err2 == nil {
		fmt.Println("NOTE: allocation after the fault succeeded")
	} else {
		fmt.Printf("after the fault: %v (sticky=%v)\n", err2, IsSticky(err2))
	}
}

// saxpyLaunch prepares a launch of the test module's saxpy over 1024
// elements for a benchmark; the memory is freed when it ends.
func saxpyLaunch(b *testing.B) (f *Function, grid, block mneme.Dim3, args [][]byte) {
	b.Helper()
	m, _ := loadTestModule(b, gpu(b))
	f, err := m.Function("saxpy")
	if err != nil {
		b.Fatal(err)
	}
	const n = 1 << 10
	var buffers [2]uint64
	for i := range buffers {
		if buffers[i], err = MemAlloc(4 * n); err != nil {
			b.Fatal(err)
		}
		addr := buffers[i]
		b.Cleanup(func() { MemFree(addr) })
	}
	args = [][]byte{u32(n), f32(2), u64(buffers[0]), u64(buffers[1])}
	return f, mneme.Dim3{X: n / 256, Y: 1, Z: 1}, mneme.Dim3{X: 256, Y: 1, Z: 1}, args
}

// BenchmarkLaunchSynchronize is the tuning loop's inner step: one small
// kernel launch and a wait for it.
func BenchmarkLaunchSynchronize(b *testing.B) {
	f, grid, block, args := saxpyLaunch(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := f.Launch(grid, block, 0, 0, args); err != nil {
			b.Fatal(err)
		}
		if err := Synchronize(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "launches/s")
}

// BenchmarkLaunchAsync measures the host cost of Launch alone (the queue is
// drained every 1000 launches).
func BenchmarkLaunchAsync(b *testing.B) {
	f, grid, block, args := saxpyLaunch(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := f.Launch(grid, block, 0, 0, args); err != nil {
			b.Fatal(err)
		}
		if i%1000 == 999 {
			Synchronize()
		}
	}
	Synchronize()
}

// BenchmarkLinkPTX is a driver JIT of a small kernel module.
func BenchmarkLinkPTX(b *testing.B) {
	p := gpu(b)
	ptx := ptxFor(p)
	for i := 0; i < b.N; i++ {
		if _, err := LinkPTX(ptx, "bench.ptx", JITOptions{OptLevel: -1}); err != nil {
			b.Fatal(err)
		}
	}
}
