package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"sync"
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

func TestRawFileUnwrapsTheTerminalWriter(t *testing.T) {
	if f, ok := rawFile(newTermWriter(os.Stderr)); !ok || f != os.Stderr {
		t.Errorf("rawFile(termWriter(stderr)) = %v, %v", f, ok)
	}
	if _, ok := rawFile(&bytes.Buffer{}); ok {
		t.Error("a buffer taken for a file")
	}
}

// TestTermWriterIsSafeForConcurrentWrites: whole lines written from several
// goroutines at once come out whole (run under -race as well).
func TestTermWriterIsSafeForConcurrentWrites(t *testing.T) {
	var out bytes.Buffer
	w := newTermWriter(&out)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				fmt.Fprintf(w, "goroutine %d: é\n", g)
			}
		}()
	}
	wg.Wait()
	w.Flush()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 800 {
		t.Fatalf("%d lines, want 800", len(lines))
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "goroutine ") || !strings.HasSuffix(l, ": é") {
			t.Fatalf("a line came out torn: %q", l)
		}
	}
}
