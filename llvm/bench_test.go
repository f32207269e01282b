package llvm

import "testing"

// BenchmarkCompileVectorAdd measures what a cold JIT compile costs on the
// LLVM side: parse bitcode, run default<O3>, emit PTX for sm_90.
func BenchmarkCompileVectorAdd(b *testing.B) {
	bc := cudaBitcode(b, "vecadd")
	tm := newTarget(b, "sm_90", 80, 3)
	b.ReportAllocs()
	for b.Loop() {
		m, err := ParseBitcode(bc, "vecadd.bc")
		if err != nil {
			b.Fatal(err)
		}
		if err := m.RunPasses("default<O3>", tm); err != nil {
			b.Fatal(err)
		}
		if _, err := tm.EmitPTX(m); err != nil {
			b.Fatal(err)
		}
		m.Dispose()
	}
}

// BenchmarkParseUnseenBitcode measures the first parse of bytes not seen
// before, which reads them once in a forked child for safety.
func BenchmarkParseUnseenBitcode(b *testing.B) {
	bc := cudaBitcode(b, "vecadd")
	for b.Loop() {
		checkedMu.Lock()
		clear(checkedBitcode)
		checkedMu.Unlock()
		m, err := ParseBitcode(bc, "vecadd.bc")
		if err != nil {
			b.Fatal(err)
		}
		m.Dispose()
	}
}

// BenchmarkStages splits the cold compile into its stages.
func BenchmarkStages(b *testing.B) {
	bc := cudaBitcode(b, "kernels")
	tm := newTarget(b, "sm_90", 80, 3)
	b.Run("parse", func(b *testing.B) {
		for b.Loop() {
			m, err := ParseBitcode(bc, "kernels.bc")
			if err != nil {
				b.Fatal(err)
			}
			m.Dispose()
		}
	})
	b.Run("extract+specialize", func(b *testing.B) {
		m, err := ParseBitcode(bc, "kernels.bc")
		if err != nil {
			b.Fatal(err)
		}
		defer m.Dispose()
		for b.Loop() {
			x, err := m.ExtractKernel(loopKernel)
			if err != nil {
				b.Fatal(err)
			}
			if err := x.SpecializeArg(loopKernel, 2, le32(100)); err != nil {
				b.Fatal(err)
			}
			if err := x.SpecializeDims(loopKernel, dim(256, 1, 1), dim(1024, 1, 1)); err != nil {
				b.Fatal(err)
			}
			x.Dispose()
		}
	})
	b.Run("O3", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			m, err := ParseBitcode(bc, "kernels.bc")
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if err := m.RunPasses("default<O3>", tm); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			m.Dispose()
			b.StartTimer()
		}
	})
	b.Run("codegen", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			m, err := ParseBitcode(bc, "kernels.bc")
			if err != nil {
				b.Fatal(err)
			}
			if err := m.RunPasses("default<O3>", tm); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if _, err := tm.EmitPTX(m); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			m.Dispose()
			b.StartTimer()
		}
	})
}

// BenchmarkKernelWrites measures the write analysis a replay session does
// once at open: extract the kernel, SROA, walk.
func BenchmarkKernelWrites(b *testing.B) {
	m := parseCUDA(b, "kernels")
	for b.Loop() {
		if _, err := m.KernelWrites("_Z11loop_kernelPfPKfif"); err != nil {
			b.Fatal(err)
		}
	}
}
