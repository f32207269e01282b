package appabi

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

func TestIRSectionRoundTrip(t *testing.T) {
	a := IREntry{Name: "vecadd.cu", Bitcode: []byte{'B', 'C', 0xc0, 0xde, 1, 2, 3}}
	b := IREntry{Name: "x.cu", Bitcode: bytes.Repeat([]byte{7}, 17)}
	sec := append(EncodeIREntry(a), make([]byte, 16)...) // linker alignment padding
	sec = append(sec, EncodeIREntry(b)...)
	if len(EncodeIREntry(a))%8 != 0 {
		t.Fatalf("entry length %d not 8-byte aligned", len(EncodeIREntry(a)))
	}
	got, err := DecodeIRSection(sec)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != a.Name || !bytes.Equal(got[0].Bitcode, a.Bitcode) || got[1].Name != b.Name || !bytes.Equal(got[1].Bitcode, b.Bitcode) {
		t.Fatalf("round trip mismatch: %+v", got)
	}
}

func TestIRSectionRejectsGarbage(t *testing.T) {
	e := EncodeIREntry(IREntry{Name: "a.cu", Bitcode: []byte("abc")})
	for name, sec := range map[string][]byte{
		"no magic":  []byte("hello world, not an entry"),
		"truncated": e[:len(e)-9],
	} {
		if _, err := DecodeIRSection(sec); !errors.Is(err, ErrBadIRSection) {
			t.Errorf("%s: want ErrBadIRSection, got %v", name, err)
		}
	}
}

func TestWrapLinkFlagNamesEverySymbol(t *testing.T) {
	f := WrapLinkFlag()
	for _, s := range WrappedSymbols {
		if !strings.Contains(f, "--wrap="+s+",") && !strings.HasSuffix(f, "--wrap="+s) {
			t.Errorf("%s missing from %s", s, f)
		}
	}
}

func FuzzDecodeIRSection(f *testing.F) {
	f.Add(EncodeIREntry(IREntry{Name: "k.cu", Bitcode: []byte("BC")}))
	f.Add([]byte("MNEMEIR1\xff\xff\xff\xff\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, sec []byte) {
		entries, err := DecodeIRSection(sec)
		if err == nil {
			var re []byte
			for _, e := range entries {
				re = append(re, EncodeIREntry(e)...)
			}
			if again, err := DecodeIRSection(re); err != nil || len(again) != len(entries) {
				t.Fatalf("re-encoded section does not decode: %v", err)
			}
		}
	})
}

func TestIRSectionFlagsAndVersion1(t *testing.T) {
	e := IREntry{Name: "k.cu", Bitcode: []byte("BC\xc0\xde body"), Flags: []string{"-O2", "-Xcuda-ptxas", "-v"}}
	got, err := DecodeIRSection(EncodeIREntry(e))
	if err != nil || len(got) != 1 || !bytes.Equal(got[0].Bitcode, e.Bitcode) || strings.Join(got[0].Flags, " ") != "-O2 -Xcuda-ptxas -v" {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	// An entry written by an older wrapper: magic MNEMEIR1, no flags field.
	v1 := append([]byte("MNEMEIR1"), binary.LittleEndian.AppendUint64(nil, 4)...)
	v1 = binary.LittleEndian.AppendUint64(v1, 4)
	v1 = append(v1, "a.cuBC\xc0\xde"...)
	got, err = DecodeIRSection(v1)
	if err != nil || len(got) != 1 || got[0].Name != "a.cu" || string(got[0].Bitcode) != "BC\xc0\xde" || got[0].Flags != nil {
		t.Fatalf("version 1 entry: %+v, %v", got, err)
	}
}
