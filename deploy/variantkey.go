package deploy

import (
	"encoding/binary"
	"fmt"

	"github.com/zeebo/xxh3"

	"github.com/mneme-gpu/mneme"
)

// IRHash identifies an executable's embedded device IR: every translation
// unit's bitcode, in order. A rebuild that changes any of it gives other
// keys, so a stale variant is never loaded.
func IRHash(bitcodes [][]byte) string {
	h := xxh3.New()
	var n [8]byte
	for _, b := range bitcodes {
		binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	sum := h.Sum128().Bytes()
	return fmt.Sprintf("%x", sum[:])
}

// VariantKey is the cache key of the variant a launch needs: cfg is the
// compile configuration for the launch (Plan.ConfigFor), with Grid and
// Block set when it specializes them; the values of the arguments it folds
// (FoldedArgs) are part of the key. The runtime and
// `mneme deploy precompile` both key through here, so a precompiled
// variant is the one a launch finds.
func VariantKey(irHash, kernel string, cfg mneme.Config, facts KernelFacts, args [][]byte, arch string, driver int, ptxas string) Key {
	k := Key{IRHash: irHash, Kernel: kernel, Arch: arch, Driver: driver, Ptxas: ptxas}
	if cfg.SpecializeDims {
		k.Block, k.Grid = cfg.Block, cfg.Grid
	}
	cfg.Block, cfg.Grid = mneme.Dim3{}, mneme.Dim3{}
	for _, i := range FoldedArgs(cfg, facts) {
		if i >= 0 && i < len(args) {
			k.Values = AppendValue(k.Values, i, args[i])
		}
	}
	k.Config = ConfigKey(cfg)
	return k
}

// FoldedArgs are the arguments whose values a compile under cfg folds in:
// none without Specialize, the listed ones when cfg names them, else every
// scalar (as the compiler folds them). It depends on the configuration, not
// on the compile that first recorded the facts, so a kernel deployed under
// another plan later keys on the right values.
func FoldedArgs(cfg mneme.Config, facts KernelFacts) []int {
	switch {
	case !cfg.Specialize:
		return nil
	case len(cfg.SpecializeArgs) > 0:
		return cfg.SpecializeArgs
	default:
		return facts.ScalarArgs
	}
}
