package main

import (
	"encoding/binary"
	"math"
	"testing"
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
