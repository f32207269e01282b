// Package jsonfield checks what encoding/json accepts silently in files that
// may come from elsewhere: an object that names a key twice (the last value
// would win unseen). Errors name the key by its path, as "instances[ab].Args".
package jsonfield

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// maxDepth bounds nesting, which no mneme file needs beyond a few levels.
const maxDepth = 64

// Check reports the first key that appears twice in one object of data, by
// its path. Syntax errors are left to the decoding that follows.
func Check(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := value(dec, "", 0); err != nil && err != errSyntax {
		return err
	}
	return nil
}

// errSyntax ends the walk at a syntax error, which the decoding that
// follows names. The walk must stop there: the decoder's More keeps
// reporting more elements before an invalid character ("[/]"), so an
// array or object loop would never end.
var errSyntax = errors.New("syntax error")

func value(dec *json.Decoder, path string, depth int) error {
	tok, err := dec.Token()
	if err != nil {
		return errSyntax // io.EOF included: the input ended inside a value
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	if depth >= maxDepth {
		return fmt.Errorf("%s: nested deeper than %d levels", orTop(path), maxDepth)
	}
	switch d {
	case '{':
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return errSyntax
			}
			key, _ := kt.(string)
			field := key
			if path != "" {
				field = path + "." + key
			}
			if seen[key] {
				return fmt.Errorf("%s: the key appears twice", field)
			}
			seen[key] = true
			if err := value(dec, field, depth+1); err != nil {
				return err
			}
		}
	case '[':
		for i := 0; dec.More(); i++ {
			if err := value(dec, fmt.Sprintf("%s[%d]", path, i), depth+1); err != nil {
				return err
			}
		}
	}
	_, _ = dec.Token() // the closing delimiter
	return nil
}

func orTop(path string) string {
	if path == "" {
		return "the top level"
	}
	return path
}
