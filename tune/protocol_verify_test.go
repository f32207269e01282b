package tune

import (
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme"
)

func TestOpenVerifyModes(t *testing.T) {
	for _, mode := range []string{"", mneme.VerifyAuto, mneme.VerifyBitwise, mneme.VerifyULP, mneme.VerifyTolerance, mneme.VerifyNone} {
		p := OpenParams{DB: "db", Iterations: 1, Verify: mneme.VerifyOptions{Mode: mode, ULP: 4}}
		if err := p.Validate(); err != nil {
			t.Errorf("mode %q: %v", mode, err)
		}
	}
	for _, c := range []struct {
		v    mneme.VerifyOptions
		want string
	}{
		{mneme.VerifyOptions{Mode: "ulp 4"}, `verify.mode "ulp 4"`},
		{mneme.VerifyOptions{Mode: "abs"}, `verify.mode "abs"`},
		{mneme.VerifyOptions{Mode: mneme.VerifyTolerance, ATol: -1}, "verify.atol -1"},
	} {
		err := OpenParams{DB: "db", Iterations: 1, Verify: c.v}.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %s", c.v, err, c.want)
		}
	}
}
