package jit

import (
	"bytes"
	"encoding/binary"
	"math"
	"sync"
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/cuda"
	"github.com/mneme-gpu/mneme/internal/gputest"
)

var (
	gpuOnce  sync.Once
	gpuCtx   *cuda.Context
	gpuProps cuda.DeviceProps
	gpuErr   error
)

// gpu returns device 0's primary context, or skips the test when this
// machine has no CUDA driver or GPU (gputest.Need).
func gpu(t testing.TB) (*cuda.Context, cuda.DeviceProps) {
	t.Helper()
	gpuOnce.Do(func() {
		if gpuErr = cuda.Init(); gpuErr != nil {
			return
		}
		var dev cuda.Device
		if dev, gpuErr = cuda.GetDevice(0); gpuErr != nil {
			return
		}
		if gpuProps, gpuErr = dev.Props(); gpuErr != nil {
			return
		}
		gpuCtx, gpuErr = dev.RetainPrimaryContext()
	})
	gputest.Need(t, gpuErr)
	return gpuCtx, gpuProps
}

func benchCompiler(b *testing.B) *Compiler { return benchCompilerDir(b, "") }

// benchCompilerDir links through the driver when a GPU is present, so the
// cold-compile figure includes ptxas there and is PTX-only elsewhere.
func benchCompilerDir(b *testing.B, dir string) *Compiler {
	opts := Options{CacheDir: dir}
	if err := cuda.Init(); err == nil {
		ctx, props := gpu(b)
		opts.Context, opts.Arch = ctx, props.Arch()
	}
	return NewCompiler(opts)
}

// runRepeatAxpy loads a compiled repeat_axpy and runs it on fresh buffers.
func runRepeatAxpy(t *testing.T, out *Output, n int, rounds int32, a float32, block, grid mneme.Dim3) []byte {
	t.Helper()
	mod, err := cuda.LoadModule(out.Cubin)
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Unload()
	fn, err := mod.Function(repeatAxpy)
	if err != nil {
		t.Fatal(err)
	}
	x := make([]byte, 4*n)
	y := make([]byte, 4*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(x[4*i:], math.Float32bits(float32(i%97)*0.25))
		binary.LittleEndian.PutUint32(y[4*i:], math.Float32bits(float32(i%13)))
	}
	dx, err := cuda.MemAlloc(uint64(len(x)))
	if err != nil {
		t.Fatal(err)
	}
	defer cuda.MemFree(dx)
	dy, err := cuda.MemAlloc(uint64(len(y)))
	if err != nil {
		t.Fatal(err)
	}
	defer cuda.MemFree(dy)
	if err := cuda.MemcpyHtoD(dx, x); err != nil {
		t.Fatal(err)
	}
	if err := cuda.MemcpyHtoD(dy, y); err != nil {
		t.Fatal(err)
	}
	args := [][]byte{i32(int32(n)), i32(rounds), f32(a), u64(dx), u64(dy)}
	if err := fn.Launch(grid, block, 0, 0, args); err != nil {
		t.Fatal(err)
	}
	if err := cuda.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if err := cuda.MemcpyDtoH(y, dy); err != nil {
		t.Fatal(err)
	}
	return y
}

// The cubin of a specialized kernel loads and computes what the generic
// one computes; resource usage and object size are reported.
func TestGPUSpecializedMatchesGeneric(t *testing.T) {
	ctx, props := gpu(t)
	c := NewCompiler(Options{Context: ctx, Arch: props.Arch()})
	const n = 1 << 16
	block, grid := mneme.Dim3{X: 256, Y: 1, Z: 1}, mneme.Dim3{X: n / 256, Y: 1, Z: 1}
	args := [][]byte{i32(n), i32(37), f32(1.5), u64(0), u64(0)}

	generic := mneme.Baseline(grid, block, 0)
	gOut, err := c.Compile(&Request{IR: testIR(t), Kernel: repeatAxpy, Config: generic, Args: args})
	if err != nil {
		t.Fatal(err)
	}
	special := generic
	special.Specialize, special.SpecializeArgs, special.SpecializeDims = true, []int{0, 1, 2}, true
	special.SetLaunchBounds, special.MaxThreads = true, 256
	sOut, err := c.Compile(&Request{IR: testIR(t), Kernel: repeatAxpy, Config: special, Args: args})
	if err != nil {
		t.Fatal(err)
	}
	for name, o := range map[string]*Output{"generic": gOut, "specialized": sOut} {
		if len(o.Cubin) == 0 || o.ObjSize != len(o.Cubin) || o.Registers <= 0 || o.Times.Ptxas <= 0 {
			t.Fatalf("%s: cubin %d bytes, obj_size %d, registers %d, ptxas %v", name, len(o.Cubin), o.ObjSize, o.Registers, o.Times.Ptxas)
		}
		t.Logf("%s: %d registers, %d B spill stores, object %d bytes, ptxas %v", name, o.Registers, o.SpillStores, o.ObjSize, o.Times.Ptxas)
	}
	want := runRepeatAxpy(t, gOut, n, 37, 1.5, block, grid)
	got := runRepeatAxpy(t, sOut, n, 37, 1.5, block, grid)
	if !bytes.Equal(want, got) {
		t.Fatal("specialized kernel output differs from the generic kernel's")
	}
	// Sanity: the result is what the kernel is meant to compute.
	v := math.Float32frombits(binary.LittleEndian.Uint32(want[4*5:]))
	exp := float32(5 % 13)
	for r := 0; r < 37; r++ {
		exp += 1.5 * float32(5%97) * 0.25
	}
	if v != exp {
		t.Fatalf("y[5] = %v, want %v", v, exp)
	}
}
