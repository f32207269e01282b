package jit

import (
	"bytes"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme/llvm"
)

func TestEncodeArg(t *testing.T) {
	i8 := llvm.Param{Kind: llvm.ParamInt, Bits: 8, Type: "i8"}
	i32 := llvm.Param{Kind: llvm.ParamInt, Bits: 32, Type: "i32"}
	i64 := llvm.Param{Kind: llvm.ParamInt, Bits: 64, Type: "i64"}
	i128 := llvm.Param{Kind: llvm.ParamInt, Bits: 128, Type: "i128"}
	ptr := llvm.Param{Kind: llvm.ParamPointer, Bits: 64, Type: "ptr addrspace(1)"}
	float := llvm.Param{Kind: llvm.ParamFloat, Bits: 32, Type: "float"}
	double := llvm.Param{Kind: llvm.ParamDouble, Bits: 64, Type: "double"}
	ff := bytes.Repeat([]byte{0xff}, 16)
	for _, c := range []struct {
		p    llvm.Param
		text string
		want []byte
	}{
		{i8, "-1", []byte{0xff}},
		{i8, "255", []byte{0xff}},
		{i32, " 1000 ", []byte{0xe8, 0x03, 0, 0}},
		{i32, "0x10", []byte{0x10, 0, 0, 0}},
		{i32, "-2147483648", []byte{0, 0, 0, 0x80}},
		{i64, "18446744073709551615", ff[:8]},
		{i64, "-1", ff[:8]},
		{i128, "-1", ff},
		{i128, "-0", make([]byte, 16)},
		{i128, "18446744073709551615", append(append([]byte{}, ff[:8]...), make([]byte, 8)...)},
		{i128, "5", append([]byte{5}, make([]byte, 15)...)},
		{ptr, "0x153940000000", []byte{0, 0, 0, 0x40, 0x39, 0x15, 0, 0}},
		{float, "1.5", []byte{0, 0, 0xc0, 0x3f}},
		{double, "-2", []byte{0, 0, 0, 0, 0, 0, 0, 0xc0}},
	} {
		got, err := EncodeArg(c.p, c.text)
		if err != nil || !bytes.Equal(got, c.want) {
			t.Errorf("EncodeArg(%s, %q) = % x, %v; want % x", c.p.Type, c.text, got, err, c.want)
		}
	}
	for _, c := range []struct {
		p    llvm.Param
		text string
		want string
	}{
		{i8, "256", "does not fit in i8"},
		{i8, "-129", "does not fit in i8"},
		{i32, "18446744073709551615", "does not fit in i32"},
		{i32, "9223372036854775808", "does not fit in i32"},
		{i32, "abc", "not an integer"},
		{float, "x", "not a float"},
		{double, "", "not a double"},
		{ptr, "-1", "not an address"},
		{llvm.Param{Kind: llvm.ParamOther, Type: "%struct.Pair"}, "1", "%struct.Pair argument cannot be given"},
	} {
		if got, err := EncodeArg(c.p, c.text); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("EncodeArg(%s, %q) = % x, %v; want an error containing %q", c.p.Type, c.text, got, err, c.want)
		}
	}
}

func FuzzEncodeArg(f *testing.F) {
	for _, s := range []string{"0", "-1", "0x7f", "18446744073709551615", "1e3", "nan", ""} {
		f.Add(s, 32)
	}
	f.Fuzz(func(t *testing.T, text string, bits int) {
		bits = 1 + (bits%128+128)%128 // 1..128
		p := llvm.Param{Kind: llvm.ParamInt, Bits: bits, Type: "int"}
		b, err := EncodeArg(p, text)
		if err == nil && len(b) != p.Bytes() {
			t.Fatalf("i%d %q: %d bytes, want %d", bits, text, len(b), p.Bytes())
		}
	})
}
