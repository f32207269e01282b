package llvm

import (
	"strconv"
	"strings"
	"testing"
)

// fuzzCorpusBytes decodes a corpus file of a []byte fuzz target.
func fuzzCorpusBytes(t *testing.T, file []byte) []byte {
	t.Helper()
	lines := strings.SplitN(string(file), "\n", 3)
	if len(lines) < 2 || lines[0] != "go test fuzz v1" || !strings.HasPrefix(lines[1], "[]byte(") {
		t.Fatalf("not a []byte fuzz corpus file")
	}
	s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
	if err != nil {
		t.Fatal(err)
	}
	return []byte(s)
}

// FuzzParseBitcode feeds arbitrary bytes to the bitcode reader: it must
// return a module or an error, never crash the process. Seeds are real
// bitcode, its truncations and single-byte corruptions.
func FuzzParseBitcode(f *testing.F) {
	for _, name := range []string{"vecadd", "kernels"} {
		bc := cudaBitcode(f, name)
		f.Add(bc)
		for n := 4; n < len(bc); n += len(bc)/16 + 1 {
			f.Add(bc[:n])
		}
		for _, at := range []int{8, 40, len(bc) / 3, len(bc) / 2, len(bc) - 8} {
			bad := append([]byte(nil), bc...)
			bad[at] ^= 0x5a
			f.Add(bad)
		}
	}
	f.Add([]byte{})
	f.Add([]byte("BC\xc0\xde"))
	f.Add([]byte("\xde\xc0\x17\x0b\x00\x00\x00\x00\x14\x00\x00\x00\xff\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseBitcode(data, "fuzz.bc")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.bc: ") {
				t.Fatalf("error does not name the input: %v", err)
			}
			return
		}
		defer m.Dispose()
		// A module that reads and verifies must survive the other read-only
		// operations too.
		for _, k := range m.Kernels() {
			if _, err := m.KernelParams(k); err != nil {
				t.Fatalf("KernelParams(%q): %v", k, err)
			}
		}
		_ = m.String()
		if _, err := ParseBitcode(m.Bitcode(), "again.bc"); err != nil {
			t.Fatalf("written bitcode does not read back: %v", err)
		}
	})
}
