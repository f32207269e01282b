package cacheseal

import (
	"bytes"
	"testing"
)

// An entry unwraps only with the prefix, domain and key it was wrapped
// with, and only while its body is the body it was sealed with.
func TestWrapUnwrapEachInputAlone(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	data, err := Wrap("jit", "entry v1 hmac:", "key", []byte(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if body, ok := Unwrap("jit", "entry v1 hmac:", "key", data); !ok || string(body) != `{"a":1}` {
		t.Fatalf("round trip: %q, %v", body, ok)
	}
	for name, try := range map[string]func() bool{
		"domain": func() bool { _, ok := Unwrap("deploy", "entry v1 hmac:", "key", data); return ok },
		"prefix": func() bool { _, ok := Unwrap("jit", "entry v2 hmac:", "key", data); return ok },
		"key":    func() bool { _, ok := Unwrap("jit", "entry v1 hmac:", "other", data); return ok },
		"body": func() bool {
			_, ok := Unwrap("jit", "entry v1 hmac:", "key", bytes.Replace(data, []byte(`"a":1`), []byte(`"a":2`), 1))
			return ok
		},
		"truncated seal": func() bool { _, ok := Unwrap("jit", "entry v1 hmac:", "key", data[:20]); return ok },
	} {
		if try() {
			t.Errorf("changing the %s alone still unwrapped", name)
		}
	}
}
