// Package jsonfield checks what encoding/json accepts silently in files that
// may come from elsewhere: an object that names a key twice (the last value
// would win unseen). Errors name the key by its path, as "instances[ab].Args".
package jsonfield

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// maxDepth bounds nesting, which no mneme file needs beyond a few levels.
const maxDepth = 64

// Check reports the first key that appears twice in one object of data, by
// its path. Syntax errors are left to the decoding that follows.
func Check(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return value(dec, "", 0)
}

func value(dec *json.Decoder, path string, depth int) error {
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			return nil
		}
		return nil // a syntax error: the decoder that follows names it
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
				return nil
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
