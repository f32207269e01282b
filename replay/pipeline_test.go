package replay

import (
	"errors"
	"strings"
	"testing"
)

func TestValidatePipeline(t *testing.T) {
	for _, ok := range []string{"default<O3>", "default<O0>", "default<Oz>", "instcombine,simplifycfg"} {
		if err := ValidatePipeline(ok); err != nil {
			t.Errorf("%q rejected: %v", ok, err)
		}
	}
	for _, bad := range []string{"default<O7>", "no-such-pass", ""} {
		err := ValidatePipeline(bad)
		var ie *InputError
		if !errors.As(err, &ie) {
			t.Errorf("%q: got %v, want an input error", bad, err)
			continue
		}
		if bad != "" && !strings.Contains(err.Error(), bad) {
			t.Errorf("%q: the error does not name the pipeline: %v", bad, err)
		}
	}
}
