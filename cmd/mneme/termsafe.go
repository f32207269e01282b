package main

import (
	"fmt"
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
