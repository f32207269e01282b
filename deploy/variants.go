package deploy

import (
	"fmt"
	"os"
	"strconv"
	"sync"
)

// DefaultMaxVariants bounds the specialized variants of one kernel: a
// kernel launched with ever new scalar values would otherwise compile on
// every launch.
const DefaultMaxVariants = 16

// MaxVariantsEnv names the variable that sets the bound.
const MaxVariantsEnv = "MNEME_JIT_MAX_VARIANTS"

// MaxVariantsFromEnv is $MNEME_JIT_MAX_VARIANTS, or DefaultMaxVariants when
// it is unset; a value that is not a positive integer gives the default and
// an error naming the variable, for the runtime to warn with.
func MaxVariantsFromEnv() (int, error) {
	s, ok := os.LookupEnv(MaxVariantsEnv)
	if !ok || s == "" {
		return DefaultMaxVariants, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return DefaultMaxVariants, fmt.Errorf("%s=%q: want a positive integer; using %d", MaxVariantsEnv, s, DefaultMaxVariants)
	}
	return n, nil
}

// Variants are the compiled variants of one kernel, keyed by its
// specialized values (Key.Values as a string), at most MaxVariants of them.
// The zero value is ready; it is safe for concurrent use.
type Variants[T any] struct {
	// MaxVariants bounds the count; 0 means DefaultMaxVariants. Set it
	// before first use.
	MaxVariants int

	mu sync.RWMutex
	m  map[string]T
}

// Lookup returns the variant stored under key.
func (v *Variants[T]) Lookup(key string) (T, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	x, ok := v.m[key]
	return x, ok
}

// Add stores x under key unless the bound is reached; false tells the caller
// to use the kernel's generic tuned variant for these values. A key already
// present keeps its first variant (Lookup returns it) and Add reports true.
func (v *Variants[T]) Add(key string, x T) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.m[key]; ok {
		return true
	}
	limit := v.MaxVariants
	if limit <= 0 {
		limit = DefaultMaxVariants
	}
	if len(v.m) >= limit {
		return false
	}
	if v.m == nil {
		v.m = map[string]T{}
	}
	v.m[key] = x
	return true
}

// Len is the number of variants stored.
func (v *Variants[T]) Len() int {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return len(v.m)
}
