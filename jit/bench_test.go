package jit

import (
	"fmt"
	"testing"

	"github.com/mneme-gpu/mneme"
)

// BenchmarkColdCompile measures a full compile of a vector-add-sized kernel:
// parse, O3, NVPTX codegen and, with a GPU, the driver JIT (ptxas). Each
// iteration uses a new key so no cache of ours can answer; run it with
// CUDA_CACHE_DISABLE=1 so the driver's JIT cache cannot either. Target: <= 25 ms.
func BenchmarkColdCompile(b *testing.B) {
	c := benchCompiler(b)
	ir := testIR(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cfg := baseConfig()
		cfg.Passes = fmt.Sprintf("default<O3>,function(instcombine<max-iterations=%d>)", 1000+i)
		if _, err := c.Compile(&Request{IR: ir, Kernel: "vecadd", Config: cfg}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCacheHit measures answering a compile from the in-memory cache,
// key hashing included. Target: <= 0.5 ms.
func BenchmarkCacheHit(b *testing.B) {
	c := benchCompiler(b)
	r := &Request{IR: testIR(b), Kernel: "vecadd", Config: baseConfig()}
	if _, err := c.Compile(r); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out, err := c.Compile(r)
		if err != nil || out.CacheHit != "memory" {
			b.Fatalf("hit=%q err=%v", out.CacheHit, err)
		}
	}
}

// BenchmarkDiskCacheHit measures a hit in the on-disk cache of a fresh process.
func BenchmarkDiskCacheHit(b *testing.B) {
	dir := b.TempDir()
	r := &Request{IR: testIR(b), Kernel: "vecadd", Config: mneme.Baseline(mneme.Dim3{X: 1, Y: 1, Z: 1}, mneme.Dim3{X: 256, Y: 1, Z: 1}, 0)}
	if _, err := benchCompilerDir(b, dir).Compile(r); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out, err := benchCompilerDir(b, dir).Compile(r)
		if err != nil || out.CacheHit != "disk" {
			b.Fatalf("hit=%q err=%v", out.CacheHit, err)
		}
	}
}
