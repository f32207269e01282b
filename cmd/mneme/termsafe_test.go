package main

import (
	"bytes"
	"testing"
)

func TestTermWriterEscapesAcrossWrites(t *testing.T) {
	var out bytes.Buffer
	w := newTermWriter(&out)
	// "é" (c3 a9) and "€" (e2 82 ac) split across writes stay whole; the
	// escape sequence and the bidi override are escaped; tabs and newlines
	// are kept.
	for _, p := range []string{"k\x1b[2J\t\xc3", "\xa9 \xe2\x82", "\xac\u202e\n", "\xff"} {
		if n, err := w.Write([]byte(p)); n != len(p) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", p, n, err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if want := "k\\x1b[2J\té €\\u202e\n\\xff"; out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
}
