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
// Block set when it specializes them; the values of the arguments facts say
// fold are part of the key only when cfg specializes. The runtime and
// `mneme deploy precompile` both key through here, so a precompiled
// variant is the one a launch finds.
func VariantKey(irHash, kernel string, cfg mneme.Config, facts KernelFacts, args [][]byte, arch string, driver int, ptxas string) Key {
	k := Key{IRHash: irHash, Kernel: kernel, Arch: arch, Driver: driver, Ptxas: ptxas}
	if cfg.SpecializeDims {
		k.Block, k.Grid = cfg.Block, cfg.Grid
	}
	cfg.Block, cfg.Grid = mneme.Dim3{}, mneme.Dim3{}
	if cfg.Specialize {
		for _, i := range facts.ScalarArgs {
			if i >= 0 && i < len(args) {
				k.Values = AppendValue(k.Values, i, args[i])
			}
		}
	}
	k.Config = ConfigKey(cfg)
	return k
}
