package mneme

import "testing"

func TestParseVerifyMode(t *testing.T) {
	for _, c := range []struct {
		in   string
		mode string
		ulp  uint64
	}{{"auto", "auto", 0}, {" bitwise ", "bitwise", 0}, {"ulp 16", "ulp", 16}, {"ulp:4", "ulp", 4}, {"ulp=0", "ulp", 0}} {
		m, u, err := ParseVerifyMode(c.in)
		if err != nil || m != c.mode || u != c.ulp {
			t.Errorf("%q: %q %d %v", c.in, m, u, err)
		}
	}
	for _, bad := range []string{"ulp", "ulp -1", "ulp x", "ulp 1.5"} {
		if _, _, err := ParseVerifyMode(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
