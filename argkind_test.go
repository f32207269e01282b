package mneme

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestArgKindFormat(t *testing.T) {
	u16 := func(v uint16) []byte { return binary.LittleEndian.AppendUint16(nil, v) }
	u32 := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
	u64 := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	for _, c := range []struct {
		kind ArgKind
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
		if got := c.kind.Format(c.b); got != c.want {
			t.Errorf("%s.Format(%x) = %q, want %q", c.kind, c.b, got, c.want)
		}
	}
}

func TestParseArgKindAndSize(t *testing.T) {
	sizes := map[string]uint64{"i8": 1, "i16": 2, "i32": 4, "i64": 8, "f16": 2, "bf16": 2, "f32": 4, "f64": 8, "ptr": 8,
		"byval:1": 1, "byval:24": 24, "byval:4294967295": math.MaxUint32}
	for text, size := range sizes {
		k, err := ParseArgKind(text)
		if err != nil || k.Size() != size || k.String() != text {
			t.Errorf("ParseArgKind(%q) = %q, %v; size %d, want %d", text, k, err, k.Size(), size)
		}
		if got := k.IsByVal(); got != strings.HasPrefix(text, "byval:") {
			t.Errorf("%s.IsByVal() = %v", k, got)
		}
		if got, want := k.Specializable(), text != "ptr" && !strings.HasPrefix(text, "byval:"); got != want {
			t.Errorf("%s.Specializable() = %v, want %v", k, got, want)
		}
	}
	for _, text := range []string{"", "int", "I32", "i1", "f128", "byval:", "byval:0", "byval:-1", "byval:x", "byval:4294967296", " ptr", "ptr "} {
		k, err := ParseArgKind(text)
		if err == nil || !strings.Contains(err.Error(), "unknown argument kind") || !strings.Contains(err.Error(), "byval:N") {
			t.Errorf("ParseArgKind(%q) = %q, %v; want an error listing the kinds", text, k, err)
		}
		if ArgKind(text).Size() != 0 {
			t.Errorf("ArgKind(%q).Size() = %d, want 0", text, ArgKind(text).Size())
		}
	}
	if k := ArgByVal(12); k != "byval:12" || k.Size() != 12 {
		t.Errorf("ArgByVal(12) = %q", k)
	}
	// JSON keeps the text.
	b, err := json.Marshal([]ArgKind{ArgPtr, ArgByVal(24)})
	if err != nil || string(b) != `["ptr","byval:24"]` {
		t.Errorf("JSON %s (%v)", b, err)
	}
}

func FuzzParseArgKind(f *testing.F) {
	for _, s := range []string{"i8", "bf16", "ptr", "byval:24", "byval:0", "byval:", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseArgKind(s)
		if err != nil {
			if ArgKind(s).Size() != 0 {
				t.Fatalf("%q is rejected but has size %d", s, ArgKind(s).Size())
			}
			return
		}
		if k.String() != s || k.Size() == 0 || k.Size() > math.MaxUint32 {
			t.Fatalf("%q parsed as %q, size %d", s, k, k.Size())
		}
		// Formatting bytes of the kind's size never panics.
		_ = k.Format(make([]byte, min(k.Size(), 64)))
		if again, err := ParseArgKind(k.String()); err != nil || again != k {
			t.Fatalf("%q does not round-trip: %q, %v", s, again, err)
		}
	})
}
