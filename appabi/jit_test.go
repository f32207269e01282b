package appabi

import (
	"slices"
	"strings"
	"testing"
)

func TestJITSectionRoundTrip(t *testing.T) {
	in := []JITAnnotation{{Kernel: "_Z7polymodPfPKfiii", Args: []int{4, 5}}, {Kernel: "noargs"}}
	var sec []byte
	for _, a := range in {
		sec = append(sec, EncodeJITAnnotation(a)...)
		sec = append(sec, 0, 0) // the linker's padding between units
	}
	got, err := DecodeJITSection(sec)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Kernel != in[0].Kernel || !slices.Equal(got[0].Args, in[0].Args) || got[1].Kernel != "noargs" || got[1].Args != nil {
		t.Fatalf("round trip gave %+v", got)
	}
}

func TestJITSectionRejectsGarbage(t *testing.T) {
	for _, bad := range []string{"jat k 1\n", "jit\n", "jit k 0\n", "jit k 1,x\n", "jit k 1 2\n"} {
		if _, err := DecodeJITSection([]byte(bad)); err == nil || !strings.Contains(err.Error(), JITSection) {
			t.Errorf("%q: error %v, want one naming the section", bad, err)
		}
	}
}

func FuzzDecodeJITSection(f *testing.F) {
	f.Add([]byte("jit _Z1kv 1,3\n"))
	f.Add([]byte("jit k\n\x00jit j 2\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := DecodeJITSection(data)
		if err != nil {
			return
		}
		for _, a := range got {
			if a.Kernel == "" {
				t.Fatalf("accepted an annotation without a kernel: %q", data)
			}
			for _, n := range a.Args {
				if n < 1 {
					t.Fatalf("accepted index %d: %q", n, data)
				}
			}
		}
	})
}
