package devicecopy

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// BenchmarkFirstTouch is the host side of a host shadow without the GPU:
// every core copies 1 MiB pieces into an anonymous mapping, as HostShadow
// moves staged runs on. "fresh" maps new memory for every copy, so the
// kernel must supply (and zero) every page on first touch; "touched" copies
// into a mapping whose pages already exist. Their difference is what a host
// shadow of fresh data pays beyond the copy itself.
func BenchmarkFirstTouch(b *testing.B) {
	const size = 1 << 30
	src := make([]byte, 256<<20)
	for i := range src {
		src[i] = byte(i)
	}
	copyInto := func(dst []byte) {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range runtime.GOMAXPROCS(0) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					off := next.Add(hostShadowPiece) - hostShadowPiece
					if off >= int64(len(dst)) {
						return
					}
					copy(dst[off:off+hostShadowPiece], src[off%int64(len(src)):])
				}
			}()
		}
		wg.Wait()
	}
	mapping := func(b *testing.B, hugePages bool) []byte {
		mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS)
		if err != nil {
			b.Fatal(err)
		}
		if hugePages {
			_ = syscall.Madvise(mem, syscall.MADV_HUGEPAGE)
		}
		return mem
	}
	for _, huge := range []bool{true, false} {
		b.Run(fmt.Sprintf("fresh/hugepages=%v", huge), func(b *testing.B) {
			b.SetBytes(size)
			for range b.N {
				b.StopTimer()
				mem := mapping(b, huge)
				b.StartTimer()
				copyInto(mem)
				b.StopTimer()
				syscall.Munmap(mem)
				b.StartTimer()
			}
		})
		b.Run(fmt.Sprintf("touched/hugepages=%v", huge), func(b *testing.B) {
			mem := mapping(b, huge)
			defer syscall.Munmap(mem)
			copyInto(mem)
			b.SetBytes(size)
			b.ResetTimer()
			for range b.N {
				copyInto(mem)
			}
		})
	}
}
