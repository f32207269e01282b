package nvbin

import (
	"strings"
	"testing"
)

func TestPTXVariables(t *testing.T) {
	ptx := `//
.version 9.0
.target sm_90
.address_size 64

.global .align 1 .b8 $str[4] = {97, 98, 99, 0};
.const .align 4 .b8 __cudart_i2opi_f[24] = {65, 144, 67, 60, 153, 149, 98, 219, 192, 221, 52, 245, 209, 87, 39, 252, 41, 21, 68, 78, 110, 131, 249, 162};
.visible .global .align 4 .f32 scale_factor;
.global .align 4 .u32 _ZL5table[8];
.visible .const .align 4 .u32 coeff; // set with cudaMemcpyToSymbol
.extern .shared .align 16 .b8 dyn[];

.visible .entry _Z1kPf(
	.param .u64 .ptr .align 1 _Z1kPf_param_0
)
{
	.local .align 4 .b8 __local_depot0[8];
	.reg .b32 %r<3>;
	.shared .align 4 .u32 _ZZ1kPfE1s;
	ret;
}
`
	got := strings.Join(PTXVariables([]byte(ptx)), " ")
	if want := "$str __cudart_i2opi_f scale_factor _ZL5table coeff"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := PTXVariables([]byte(".visible .entry k()\n{\n.global .u32 inside;\n}\n")); len(got) != 0 {
		t.Errorf("a declaration inside a function: %q", got)
	}
}

func FuzzPTXVariables(f *testing.F) {
	f.Add([]byte(".visible .global .align 4 .f32 x;\n.const .b8 t[2] = {1, 2};\n{\n.global .u32 y;\n}\n"))
	f.Add([]byte(".global ;\n.const [\n}}}\n.global .u32 z"))
	f.Fuzz(func(t *testing.T, ptx []byte) {
		for _, name := range PTXVariables(ptx) {
			if name == "" || strings.ContainsAny(name, " \t[;=") || name[0] == '.' {
				t.Fatalf("name %q", name)
			}
		}
	})
}
