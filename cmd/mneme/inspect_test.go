package main

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/mneme-gpu/mneme/db"
)

func TestFormatArg(t *testing.T) {
	u16 := func(v uint16) []byte { return binary.LittleEndian.AppendUint16(nil, v) }
	u32 := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
	u64 := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	for _, c := range []struct {
		kind string
		b    []byte
		want string
	}{
		{"i8", []byte{0xff}, "-1"},
		{"i16", u16(0x8000), "-32768"},
		{"i32", u32(1000), "1000"},
		{"i32", u32(0xfffffffe), "-2"},
		{"i64", u64(1 << 40), "1099511627776"},
		{"f32", u32(math.Float32bits(2.5)), "2.5"},
		{"f32", u32(math.Float32bits(0.1)), "0.1"},
		{"f64", u64(math.Float64bits(-0.25)), "-0.25"},
		{"f16", u16(0x3c00), "1"},
		{"f16", u16(0xc100), "-2.5"},
		{"f16", u16(0x0001), "5.9604645e-08"},
		{"bf16", u16(0x4049), "3.140625"},
		{"ptr", u64(0x153940000000), "0x153940000000"},
		{"byval:4", []byte{1, 2, 3, 4}, "0x01020304"},
		{"byval:20", make([]byte, 20), "0x00000000000000000000000000000000…(20 bytes)"},
		{"i32", []byte{1}, "0x01"}, // size mismatch falls back to bytes
	} {
		if got := formatArg(c.kind, c.b); got != c.want {
			t.Errorf("formatArg(%s, %x) = %q, want %q", c.kind, c.b, got, c.want)
		}
	}
}

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
