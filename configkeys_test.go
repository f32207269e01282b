package mneme

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// keyHomonyms are configuration keys that are also ordinary words elsewhere:
// a sampler is called "grid", and output documents of inspect and compile,
// the user settings and the compiled kernel have fields of their own named
// grid, block, shared_mem and arch.
var keyHomonyms = map[string]bool{KeyGrid: true, KeyBlock: true, KeySharedMem: true, KeyArch: true}

// TestConfigKeysSpelledOnce: every other key is written as a string literal
// in config.go only, so adding or renaming a knob is a change to one file.
func TestConfigKeysSpelledOnce(t *testing.T) {
	var sources []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && path != "." {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") && path != "config.go" {
			sources = append(sources, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range sources {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range ConfigFields() {
			if !keyHomonyms[f.Key] && strings.Contains(string(data), `"`+f.Key+`"`) {
				t.Errorf("%s spells the configuration key %q; use mneme.Key* or the field table", path, f.Key)
			}
		}
	}
}
