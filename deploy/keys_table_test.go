package deploy

import (
	"bytes"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/internal/keytest"
)

// variantInputs are everything VariantKey reads, so one table can change
// each alone.
type variantInputs struct {
	IRHash, Kernel string
	Config         mneme.Config
	Facts          KernelFacts
	Arg0, Arg1     []byte // a pointer and a scalar
	Arg2           []byte // a second scalar
	Arch           string
	Driver         int
	Ptxas          string
}

func (in variantInputs) key() string {
	return VariantKey(in.IRHash, in.Kernel, in.Config, in.Facts, [][]byte{in.Arg0, in.Arg1, in.Arg2}, in.Arch, in.Driver, in.Ptxas).Hash()
}

func baseVariantInputs() variantInputs {
	cfg := mneme.Baseline(mneme.Dim3{X: 64, Y: 2, Z: 3}, mneme.Dim3{X: 128, Y: 2, Z: 1}, 256)
	cfg.Specialize, cfg.SpecializeDims, cfg.SetLaunchBounds = true, true, true
	cfg.MaxThreads, cfg.MinBlocksPerSM = 256, 2
	return variantInputs{IRHash: "0123abcd", Kernel: "_Z1kPfii", Config: cfg,
		Facts: KernelFacts{ScalarArgs: []int{1, 2}, ArgSizes: []int{8, 4, 4}},
		Arg0:  []byte{1, 2, 3, 4, 5, 6, 7, 8}, Arg1: []byte{9, 0, 0, 0}, Arg2: []byte{3, 0, 0, 0},
		Arch: "sm_90", Driver: 13000, Ptxas: "ptxas 13.0"}
}

// Each input of VariantKey changed alone: a different key where the
// compiled code can differ, the same key where it cannot (a variant that
// would be compiled again for nothing, or worse, loaded for a launch it was
// not compiled for).
func TestVariantKeyEachInputAlone(t *testing.T) {
	specialized := baseVariantInputs()
	plain := baseVariantInputs()
	plain.Config.Specialize, plain.Config.SpecializeDims = false, false
	named := baseVariantInputs()
	named.Config.SpecializeArgs = []int{2} // fold argument 2 only
	cases := []struct {
		name string
		base variantInputs
		// same lists the inputs whose change must keep the key.
		same map[string]bool
	}{
		{"everything folded", specialized, map[string]bool{
			// the pointer argument is never folded
			"Arg0": true, "Config.SharedMem": true, "Config.Original": true,
			// facts that do not pick folded arguments
			"Facts.ArgSizes": true, "Facts.Globals": true}},
		{"nothing folded", plain, map[string]bool{
			"Arg0": true, "Arg1": true, "Arg2": true, "Config.SharedMem": true, "Config.Original": true,
			"Config.Grid.X": true, "Config.Grid.Y": true, "Config.Grid.Z": true,
			"Config.Block.X": true, "Config.Block.Y": true, "Config.Block.Z": true,
			"Facts.ScalarArgs": true, "Facts.ArgSizes": true, "Facts.Globals": true}},
		{"named arguments folded", named, map[string]bool{
			"Arg0": true, "Arg1": true, "Config.SharedMem": true, "Config.Original": true,
			"Facts.ScalarArgs": true, "Facts.ArgSizes": true, "Facts.Globals": true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := tc.base.key()
			if again := tc.base.key(); again != base {
				t.Fatalf("equal inputs gave keys %s and %s", base, again)
			}
			for _, v := range keytest.EachLeaf(tc.base) {
				got := v.Value.key()
				if want := tc.same[v.Path]; (got == base) != want {
					t.Errorf("changing %s alone: same key %v, want %v", v.Path, got == base, want)
				}
			}
		})
	}
}

// A byte moved from one folded argument to the next, or a value moved to
// another argument, is another launch.
func TestVariantKeyKeepsArgumentBoundaries(t *testing.T) {
	in := baseVariantInputs()
	moved := in
	moved.Arg1, moved.Arg2 = []byte{9, 0, 0}, []byte{0, 3, 0, 0, 0}
	swapped := in
	swapped.Arg1, swapped.Arg2 = in.Arg2, in.Arg1
	keys := map[string]string{}
	for name, x := range map[string]variantInputs{"base": in, "moved": moved, "swapped": swapped} {
		k := x.key()
		if prev, ok := keys[k]; ok {
			t.Errorf("%s and %s share a key", name, prev)
		}
		keys[k] = name
	}
}

// Every field of the configuration that reaches the compiler changes
// ConfigKey both ways (off to on and on to off), and the launch-only ones
// change it in neither.
func TestConfigKeyEachFieldBothWays(t *testing.T) {
	on := mneme.Baseline(mneme.Dim3{X: 1, Y: 1, Z: 1}, mneme.Dim3{X: 32, Y: 1, Z: 1}, 0)
	on.Specialize, on.SpecializeDims, on.SetLaunchBounds, on.Prune, on.Internalize = true, true, true, true, true
	on.Original = true
	off := on
	off.Specialize, off.SpecializeDims, off.SetLaunchBounds, off.Prune, off.Internalize, off.Original = false, false, false, false, false, false
	for _, base := range []mneme.Config{on, off} {
		bk := ConfigKey(base)
		for _, v := range keytest.EachLeaf(base) {
			launchOnly := v.Path == "SharedMem" || v.Path == "Original" || strings.HasPrefix(v.Path, "Grid.") || strings.HasPrefix(v.Path, "Block.")
			if same := ConfigKey(v.Value) == bk; same != launchOnly {
				t.Errorf("switches %v: changing %s alone: same key %v, want %v", base.Specialize, v.Path, same, launchOnly)
			}
		}
	}
}

// IRHash changes with any translation unit's bytes, their order and their
// count, and keeps the unit boundaries.
func TestIRHashEachInputAlone(t *testing.T) {
	base := [][]byte{[]byte("unit one"), []byte("unit two")}
	variants := map[string][][]byte{
		"first unit":   {[]byte("unit onf"), []byte("unit two")},
		"second unit":  {[]byte("unit one"), []byte("unit twp")},
		"order":        {[]byte("unit two"), []byte("unit one")},
		"one more":     {[]byte("unit one"), []byte("unit two"), nil},
		"one fewer":    {[]byte("unit one")},
		"boundary":     {[]byte("unit on"), []byte("eunit two")},
		"empty":        nil,
		"one empty tu": {nil},
	}
	seen := map[string]string{IRHash(base): "base"}
	for name, v := range variants {
		h := IRHash(v)
		if prev, ok := seen[h]; ok {
			t.Errorf("%s gives the hash of %s", name, prev)
		}
		seen[h] = name
	}
	if IRHash([][]byte{[]byte("unit one"), []byte("unit two")}) != IRHash(base) {
		t.Error("equal units gave different hashes")
	}
}

// Facts are found by module and kernel, each alone: facts of one kernel
// never answer for another kernel of the module or the same kernel of
// another module, from memory or from disk.
func TestFactsKeyEachInputAlone(t *testing.T) {
	dir := t.TempDir()
	c := NewCache(dir)
	facts := &KernelFacts{ScalarArgs: []int{1}, ArgSizes: []int{8, 4}}
	if err := c.PutFacts("ab", "c", facts); err != nil {
		t.Fatal(err)
	}
	for _, cache := range map[string]*Cache{"memory": c, "disk": NewCache(dir)} {
		if _, ok := cache.GetFacts("ab", "c"); !ok {
			t.Fatal("the facts put are not found")
		}
		for _, other := range [][2]string{{"ab", "d"}, {"ax", "c"}, {"a", "bc"}, {"abc", ""}} {
			if _, ok := cache.GetFacts(other[0], other[1]); ok {
				t.Errorf("facts of module ab, kernel c answer for module %s, kernel %s", other[0], other[1])
			}
		}
	}
}

// A named argument one past the last (as many as the launch has) folds
// nothing, like any index outside the arguments; the one before it folds.
func TestVariantKeyIndexOnePastTheArguments(t *testing.T) {
	cfg := mneme.Config{Passes: "default<O3>", CodegenOpt: 3, Specialize: true, SpecializeArgs: []int{1, 2}}
	a := VariantKey("ir", "k", cfg, KernelFacts{}, [][]byte{{0}, {1}}, "sm_90", 1, "")
	b := VariantKey("ir", "k", cfg, KernelFacts{}, [][]byte{{0}, {2}}, "sm_90", 1, "")
	if a.Hash() == b.Hash() {
		t.Error("argument 1 is folded: its value must enter the key")
	}
	if want := AppendValue(nil, 1, []byte{1}); !bytes.Equal(a.Values, want) {
		t.Errorf("values %x, want %x (argument 1 only)", a.Values, want)
	}
}
