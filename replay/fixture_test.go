package replay

import (
	"encoding/binary"
	"math"
	"sync"
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/internal/gputest"
	"github.com/mneme-gpu/mneme/replay/internal/fixture"
)

var (
	irOnce sync.Once
	irData []byte
	irErr  error
)

// testIR is testdata/kernels.cu compiled to device bitcode, once.
func testIR(t testing.TB) []byte {
	t.Helper()
	irOnce.Do(func() { irData, irErr = fixture.CompileCUDA("testdata/kernels.cu") })
	// A missing clang skips; a failing compile of the kernels fails.
	gputest.Tool(t, irErr)
	return irData
}

func f32buf(n int, f func(i int) float32) []byte {
	b := make([]byte, 4*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f(i)))
	}
	return b
}

func f32at(b []byte, i int) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])) }

func dim(x uint32) mneme.Dim3 { return mneme.Dim3{X: x, Y: 1, Z: 1} }

// vecaddLaunch is c = a + b over n floats with 256-thread blocks.
func vecaddLaunch(n int) *fixture.Launch {
	return &fixture.Launch{
		Kernel: "vecadd", Grid: dim(uint32((n + 255) / 256)), Block: dim(256),
		Args: []fixture.Arg{fixture.Ptr("a", 0), fixture.Ptr("b", 1), fixture.Ptr("c", 2), fixture.I32("n", int32(n))},
		Buffers: [][]byte{
			f32buf(n, func(i int) float32 { return float32(i%1000) * 0.5 }),
			f32buf(n, func(i int) float32 { return float32(i%7) - 3 }),
			f32buf(n, func(int) float32 { return -1 }),
		},
	}
}

// vecaddHost is vecadd's epilogue computed on the host.
func vecaddHost(bufs [][]byte) {
	n := len(bufs[2]) / 4
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(bufs[2][4*i:], math.Float32bits(f32at(bufs[0], i)+f32at(bufs[1], i)))
	}
}
