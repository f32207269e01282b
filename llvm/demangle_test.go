package llvm

import "testing"

func TestDemangle(t *testing.T) {
	for in, want := range map[string]string{
		"_Z4vaddPKfS0_Pfif": "vadd(float const*, float const*, float*, int, float)",
		"_Z5scalePfi":       "scale(float*, int)",
		"plain_c_kernel":    "plain_c_kernel",
		"":                  "",
	} {
		if got := Demangle(in); got != want {
			t.Errorf("Demangle(%q) = %q, want %q", in, got, want)
		}
	}
}
