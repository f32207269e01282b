package db

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// kernelWith is a kernel in memory with the given static hash and instances.
func kernelWith(sh, name, demangled string, dhs ...string) *Kernel {
	k := &Kernel{StaticHash: sh, KernelName: name, DemangledName: demangled, Instances: map[string]*Instance{}}
	for _, dh := range dhs {
		k.Instances[dh] = &Instance{DynamicHash: dh}
	}
	return k
}

// TestFindQualifiedPrefersTheExactStaticHash: "<sh>/<dh>" with a static hash
// that is also a prefix of another kernel's names the kernel whose hash it
// is in full.
func TestFindQualifiedPrefersTheExactStaticHash(t *testing.T) {
	short := kernelWith("abc", "_Z5shortv", "", "1111")
	long := kernelWith("abcd", "_Z4longv", "", "1111")
	d := &DB{Kernels: []*Kernel{short, long}}
	for q, want := range map[string]*Kernel{"abc/1111": short, "abcd/1111": long} {
		k, inst, err := d.Find(q)
		if err != nil || k != want || inst.DynamicHash != "1111" {
			t.Errorf("Find(%q) = %v, %v", q, k, err)
		}
	}
	if _, _, err := d.Find("1111"); !errors.Is(err, ErrAmbiguousInstance) {
		t.Errorf("Find of a dynamic hash both share: %v", err)
	}
}

// TestFindErrorsListInstances: a failed Find names the instances there are,
// a few of them and how many more, or says there are none.
func TestFindErrorsListInstances(t *testing.T) {
	var dhs []string
	for i := range 10 {
		dhs = append(dhs, fmt.Sprintf("%016x", i+1))
	}
	d := &DB{Dir: "db", Kernels: []*Kernel{kernelWith("5555", "_Z1kv", "k()", dhs...)}}
	_, _, err := d.Find("ffff")
	if !errors.Is(err, ErrNoInstance) || !strings.Contains(err.Error(), "5555/0000000000000001 (k()), ") || !strings.Contains(err.Error(), ", and 2 more)") {
		t.Errorf("Find in 10 instances: %v", err)
	}
	if n := strings.Count(err.Error(), "5555/"); n != 8 {
		t.Errorf("Find in 10 instances lists %d of them: %v", n, err)
	}
	empty := &DB{Dir: "db"}
	if _, _, err := empty.Find("ffff"); !errors.Is(err, ErrNoInstance) || !strings.Contains(err.Error(), "(it has no instances)") {
		t.Errorf("Find in no instances: %v", err)
	}
}

// TestKernelNameIsDemangledWhenKnown: people see the demangled name when the
// recording has one, the mangled name otherwise.
func TestKernelNameIsDemangledWhenKnown(t *testing.T) {
	if got := kernelWith("1", "_Z1kPf", "k(float*)").Name(); got != "k(float*)" {
		t.Errorf("Name() = %q, want the demangled name", got)
	}
	if got := kernelWith("1", "_Z1kPf", "").Name(); got != "_Z1kPf" {
		t.Errorf("Name() = %q, want the mangled name", got)
	}
}
