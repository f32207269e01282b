package main

import (
	"testing"

	"github.com/mneme-gpu/mneme/db"
)

func TestHumanBytes(t *testing.T) {
	for n, want := range map[uint64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 3 << 20: "3.0 MiB", 150 << 30: "150.0 GiB"} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestShortIDsResolveToTheirInstance: every short id is as short as it can
// be (at least 8 digits) and Find resolves it to its own instance, including
// hashes that share long prefixes and a launch recorded for two kernels.
func TestShortIDsResolveToTheirInstance(t *testing.T) {
	kernel := func(sh string, dhs ...string) *db.Kernel {
		k := &db.Kernel{StaticHash: sh, KernelName: sh, Instances: map[string]*db.Instance{}}
		for _, dh := range dhs {
			k.Instances[dh] = &db.Instance{DynamicHash: dh}
		}
		return k
	}
	d := &db.DB{Dir: "rdb", Kernels: []*db.Kernel{
		kernel("aaaa000011112222", "0123456789abcdef", "0123456789abcd00", "fedcba9876543210", "5555555555555555"),
		kernel("bbbb000011112222", "0123456700000000", "5555555555555555"),
	}}
	want := map[string]string{
		"aaaa000011112222/0123456789abcdef": "0123456789abcde",
		"aaaa000011112222/0123456789abcd00": "0123456789abcd0",
		"aaaa000011112222/fedcba9876543210": "fedcba98",
		"bbbb000011112222/0123456700000000": "012345670",
		"aaaa000011112222/5555555555555555": "aaaa0000/55555555",
		"bbbb000011112222/5555555555555555": "bbbb0000/55555555",
	}
	got := shortIDs(d)
	for _, r := range d.All() {
		id := got[r.ID()]
		if id != want[r.ID()] {
			t.Errorf("%s: short id %q, want %q", r.ID(), id, want[r.ID()])
		}
		if k, inst, err := d.Find(id); err != nil || k != r.Kernel || inst != r.Instance {
			t.Errorf("%s: Find(%q) does not resolve to it: %v", r.ID(), id, err)
		}
	}
}
