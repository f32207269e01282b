package deploy

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func TestVariantsBound(t *testing.T) {
	var v Variants[int]
	for i := 0; i < DefaultMaxVariants; i++ {
		if !v.Add(strconv.Itoa(i), i) {
			t.Fatalf("variant %d refused below the default bound", i)
		}
	}
	if v.Add("one more", 99) {
		t.Fatal("the default bound was not applied")
	}
	if _, ok := v.Lookup("one more"); ok {
		t.Fatal("a refused variant is stored")
	}
	// A key already stored is not a new variant: it keeps its first value.
	if !v.Add("3", 33) {
		t.Error("re-adding a stored key at the bound was refused")
	}
	if x, ok := v.Lookup("3"); !ok || x != 3 {
		t.Errorf("lookup 3: %d %v", x, ok)
	}
	if v.Len() != DefaultMaxVariants {
		t.Errorf("len %d", v.Len())
	}

	w := Variants[string]{MaxVariants: 2}
	if !w.Add("a", "A") || !w.Add("b", "B") || w.Add("c", "C") {
		t.Error("bound 2")
	}
}

func TestVariantsConcurrent(t *testing.T) {
	v := &Variants[int]{MaxVariants: 10}
	var added atomic.Int32
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				key := strconv.Itoa(g*50 + i)
				if v.Add(key, i) {
					added.Add(1)
					if _, ok := v.Lookup(key); !ok {
						t.Errorf("added %s not found", key)
					}
				}
			}
		}(g)
	}
	wg.Wait()
	if added.Load() != 10 || v.Len() != 10 {
		t.Errorf("added %d, len %d, want 10", added.Load(), v.Len())
	}
}

func TestMaxVariantsFromEnv(t *testing.T) {
	t.Setenv(MaxVariantsEnv, "")
	if n, err := MaxVariantsFromEnv(); n != DefaultMaxVariants || err != nil {
		t.Errorf("unset: %d %v", n, err)
	}
	t.Setenv(MaxVariantsEnv, "4")
	if n, err := MaxVariantsFromEnv(); n != 4 || err != nil {
		t.Errorf("4: %d %v", n, err)
	}
	for _, bad := range []string{"0", "-3", "many", "1.5"} {
		t.Setenv(MaxVariantsEnv, bad)
		if n, err := MaxVariantsFromEnv(); n != DefaultMaxVariants || err == nil || !strings.Contains(err.Error(), MaxVariantsEnv) {
			t.Errorf("%q: %d %v", bad, n, err)
		}
	}
}
