package jit

import (
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/llvm"
)

const priceOptions = "price_options"

// The float arguments of price_options and their indices.
const rateArg, volArg = 5, 6

func optionArgs(rate, vol float32) [][]byte {
	return [][]byte{u64(0x7f0000000000), u64(0x7f0000100000), u64(0x7f0000200000), u64(0x7f0000300000), u64(0x7f0000400000),
		f32(rate), f32(vol), i32(1 << 20)}
}

// driftRoundings is rate + 0.5*vol*vol rounded as the GPU computes it
// (0.5*vol, then one fma) and with the product rounded before the add.
func driftRoundings(rate, vol float32) (fused, unfused float32) {
	half := float32(0.5) * vol // exact: a power of two
	exact := new(big.Float).SetPrec(256).SetFloat64(float64(half))
	exact.Mul(exact, new(big.Float).SetPrec(256).SetFloat64(float64(vol)))
	exact.Add(exact, new(big.Float).SetPrec(256).SetFloat64(float64(rate)))
	fused, _ = exact.Float32()
	// The conversions round each step; Go may not fuse across them.
	unfused = float32(rate + float32(half*vol))
	return fused, unfused
}

// roundingSensitiveArgs finds a rate and volatility whose drift term rounds
// differently fused and unfused, so the test can tell the two apart.
func roundingSensitiveArgs(t *testing.T) (rate, vol float32) {
	t.Helper()
	for i := 0; i < 1000; i++ {
		rate, vol = 0.02+float32(i)*1e-4, 0.30+float32(i)*1e-3
		if fused, unfused := driftRoundings(rate, vol); fused != unfused {
			return rate, vol
		}
	}
	t.Fatal("no rate and volatility among the candidates rounds differently fused and unfused")
	return 0, 0
}

func ptxFloat(v float32) string { return fmt.Sprintf("0f%08X", math.Float32bits(v)) }

// Folding float arguments keeps the application's single rounding of a
// multiply-add whose operands all fold: the constant in the PTX is the fused
// value, not the product rounded before the add.
func TestFoldedFloatArgumentsKeepTheFusedRounding(t *testing.T) {
	rate, vol := roundingSensitiveArgs(t)
	fused, unfused := driftRoundings(rate, vol)
	c := NewCompiler(Options{})
	cfg := baseConfig()
	cfg.Specialize = true
	out, err := c.Compile(&Request{Name: "kernels.bc", IR: testIR(t), Kernel: priceOptions, Config: cfg, Args: optionArgs(rate, vol)})
	if err != nil {
		t.Fatal(err)
	}
	ptx := string(out.PTX)
	for _, i := range []int{rateArg, volArg} {
		if regexp.MustCompile(fmt.Sprintf(`ld\.param\.f32\s+%%\w+, \[price_options_param_%d\]`, i)).MatchString(ptx) {
			t.Errorf("argument %d is still read from the parameters: not folded\n%s", i, ptx)
		}
	}
	if !strings.Contains(ptx, ptxFloat(fused)) {
		t.Errorf("the folded rate + 0.5*vol*vol should be the fused %v (%s); PTX:\n%s", fused, ptxFloat(fused), ptx)
	}
	if strings.Contains(ptx, ptxFloat(unfused)) {
		t.Errorf("the PTX holds %v (%s), the drift with its product rounded before the add", unfused, ptxFloat(unfused))
	}
}

// The fmas made explicit before folding are exactly those the code
// generator forms: without folding anything, the PTX is unchanged. In
// float (price_options' rate + 0.5*vol*vol), half (fma.rn.f16) and bfloat
// (computed in float), under every fusion mode: "off" still fuses what the
// IR marks contract, as clang marks every operation under CUDA's default.
func TestExplicitFusionIsWhatCodeGenerationDoes(t *testing.T) {
	ir := testIR(t)
	emit := func(kernel string, floats []int, fuse bool, fusion string) (string, int) {
		m, err := llvm.ParseBitcode(ir, "kernels.bc")
		if err != nil {
			t.Fatal(err)
		}
		defer m.Dispose()
		cfg := baseConfig()
		cfg.FPContract = fusion
		tm, mode, err := newTargetMachine(m, kernel, "sm_90", cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer tm.Dispose()
		if err := m.RunPasses(mneme.DefaultPipeline, tm); err != nil {
			t.Fatal(err)
		}
		n := 0
		if fuse {
			if n, err = m.FuseFoldedMultiplyAdds(kernel, floats, mode); err != nil {
				t.Fatal(err)
			}
			if err := m.RunPasses(foldPipeline, tm); err != nil {
				t.Fatal(err)
			}
		}
		ptx, err := tm.EmitPTX(m)
		if err != nil {
			t.Fatal(err)
		}
		return ptx, n
	}
	for _, k := range []struct {
		kernel string
		floats []int
	}{{priceOptions, []int{rateArg, volArg}}, {"scale_half", []int{2, 3}}, {"scale_bf16", []int{2, 3}}} {
		for _, fusion := range []string{"", "fast", "on", "off"} {
			plain, _ := emit(k.kernel, k.floats, false, fusion)
			explicit, n := emit(k.kernel, k.floats, true, fusion)
			if n != 1 {
				t.Errorf("%s, fp_contract %q: %d multiply-adds made explicit, want 1 (the product of two folded arguments plus one)", k.kernel, fusion, n)
			}
			if explicit != plain {
				t.Errorf("%s, fp_contract %q: PTX changed by making the fusion explicit\n--- plain\n%s\n--- explicit\n%s", k.kernel, fusion, plain, explicit)
			}
		}
	}
}
