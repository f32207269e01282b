package db

import (
	"strings"
	"testing"
)

// A kernel recorded as machine code only has DeviceCode and no Modules; one
// recorded with IR has Modules. Each field is changed alone.
func TestKernelCodeKinds(t *testing.T) {
	machine := func() *Kernel {
		k := sampleKernel(t, "_Z4vaddPfi", 100)
		k.Code, k.Modules, k.DeviceCode = CodeMachine, []string{}, DeviceCodeFileName([]byte("cubin"))
		return k
	}
	if err := machine().Validate(); err != nil {
		t.Fatalf("a machine-code kernel: %v", err)
	}
	if !machine().MachineCodeOnly() || sampleKernel(t, "k").MachineCodeOnly() {
		t.Error("MachineCodeOnly does not follow Code")
	}
	ir := sampleKernel(t, "_Z4vaddPfi", 100)
	ir.Code = CodeIR
	if err := ir.Validate(); err != nil {
		t.Fatalf("an IR kernel with Code %q: %v", CodeIR, err)
	}
	for name, c := range map[string]struct {
		k     *Kernel
		field string
	}{
		"machine without device code": {func() *Kernel { k := machine(); k.DeviceCode = ""; return k }(), "DeviceCode"},
		"machine with IR":             {func() *Kernel { k := machine(); k.Modules = []string{IRFileName(k.StaticHash)}; return k }(), "Modules"},
		"IR without modules":          {func() *Kernel { k := machine(); k.Code = CodeIR; return k }(), "Modules"},
		"unset without modules":       {func() *Kernel { k := machine(); k.Code = ""; return k }(), "Modules"},
		"unknown code":                {func() *Kernel { k := machine(); k.Code = "sass"; return k }(), "Code"},
	} {
		if err := c.k.Validate(); err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: %v, want an error naming %s", name, err, c.field)
		}
	}
}
