package main

import (
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// termSafe escapes what a terminal would act on rather than show: control
// characters (escape sequences start with one), invalid UTF-8 and the
// bidirectional overrides that reorder what is shown. Names from a
// database or a results folder pass through it before they are printed.
// Newlines are kept when keepNewlines is set (multi-line messages).
func termSafe(s string, keepNewlines bool) string {
	clean := true
	for _, r := range s {
		if needsEscape(r, keepNewlines) {
			clean = false
			break
		}
	}
	if clean && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case needsEscape(r, keepNewlines):
			if r < 0x100 {
				fmt.Fprintf(&b, `\x%02x`, r)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteRune(r)
		}
		i += size
	}
	return b.String()
}

func needsEscape(r rune, keepNewlines bool) bool {
	if r == '\n' && keepNewlines || r == '\t' {
		return false
	}
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == utf8.RuneError
}

// termWriter escapes, as termSafe does with newlines kept, everything
// written to it: every command's messages and reports pass through one, so
// a name from a recording, a tuned file or a results folder cannot drive
// the terminal from any command. A rune split across two writes is held
// back until its end arrives.
type termWriter struct {
	w       io.Writer
	pending []byte
}

func newTermWriter(w io.Writer) *termWriter { return &termWriter{w: w} }

func (t *termWriter) Write(p []byte) (int, error) {
	data := append(t.pending, p...)
	// Keep back an incomplete rune at the end (at most 3 bytes).
	cut := len(data)
	for i := len(data) - 1; i >= 0 && i >= len(data)-3; i-- {
		if utf8.RuneStart(data[i]) {
			if !utf8.FullRune(data[i:]) {
				cut = i
			}
			break
		}
	}
	t.pending = append(t.pending[:0:0], data[cut:]...)
	if _, err := io.WriteString(t.w, termSafe(string(data[:cut]), true)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes out what is held back (an incomplete rune, escaped).
func (t *termWriter) Flush() error {
	if len(t.pending) == 0 {
		return nil
	}
	_, err := io.WriteString(t.w, termSafe(string(t.pending), true))
	t.pending = nil
	return err
}
