package llvm

import (
	"fmt"
	"strings"
	"testing"
)

// sitesText prints write sites one per line as "base: kind type op".
func sitesText(ws []WriteSite) string {
	var b strings.Builder
	for _, s := range ws {
		fmt.Fprintf(&b, "%s: %s %s %s\n", s.Base, s.Write.Kind, s.Write.Type, s.Write.Op)
	}
	return b.String()
}

func TestKernelWrites(t *testing.T) {
	m := parseCUDA(t, "writes")
	cases := []struct{ kernel, want string }{
		{"_Z11store_floatPfPKf", "param 0: store float \n"},
		{"_Z12store_doublePdPKd", "param 0: store double \n"},
		{"_Z12atomic_floatPfPKf", "param 0: atomicrmw float fadd\nglobal device_sum: atomicrmw float fadd\n"},
		{"_Z9store_intPii", "param 0: store i32 \nglobal device_count: store i32 \n"},
		{"_Z12store_structPc3Rec", "param 0: memory  \n"},
		{"_Z12store_loadedPPfPi", "param 1: store i32 \nunknown: store float \n"},
		{"_Z14store_selectedPfS_b", "param 0: store float \nparam 1: store float \n"},
		{"_Z15store_in_calleePd", "param 0: store double \n"},
		{"_Z11store_field5Views", "param 0+0: store float \n"},
		{"_Z12store_vectorPDv4_f", "param 0: store float \n"},
		{"_Z12compare_swapPiPc", "param 0: cmpxchg i32 \nparam 1: memory  \n"},
	}
	before := m.String()
	for _, c := range cases {
		w, err := m.KernelWrites(c.kernel)
		if err != nil {
			t.Fatalf("%s: %v", c.kernel, err)
		}
		if got := sitesText(w.Writes); got != c.want {
			t.Errorf("%s: writes\n%s\nwant\n%s", c.kernel, got, c.want)
		}
	}
	if m.String() != before {
		t.Error("KernelWrites changed the module it analyzed")
	}
	if _, err := m.KernelWrites("no_such_kernel"); err == nil {
		t.Error("KernelWrites of a missing kernel: no error")
	}
}
