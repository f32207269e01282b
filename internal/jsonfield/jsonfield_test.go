package jsonfield

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"a":1,"b":{"c":[1,{"d":2}]}}`, ""},
		{`{"a":1,"a":2}`, "a: the key appears twice"},
		{`{"x":{"y":[{"z":1},{"z":1,"z":2}]}}`, "x.y[1].z: the key appears twice"},
		{`{"a":`, ""},
		{``, ""},
		// Syntax errors inside an array or object end the walk (they once
		// looped forever); the decoding that follows reports them.
		{`[/]`, ""},
		{`{"a":[1,/]}`, ""},
		{`{"a":{"b":/}}`, ""},
		{`{"a":1,/}`, ""},
		{`[{"a":1,"a":2},/]`, "[0].a: the key appears twice"},
		{strings.Repeat("[", 100) + strings.Repeat("]", 100), "nested deeper"},
	} {
		err := Check([]byte(c.in))
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("Check(%s) = %v, want %q", c.in, err, c.want)
		}
	}
}
