package cacheseal

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestSecretIsMadeOnceAndKeptPrivate(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	path, err := SecretPath()
	if err != nil {
		t.Fatal(err)
	}
	// Processes starting at once (here goroutines, each reading afresh)
	// all end up with one secret.
	secrets := make([][]byte, 8)
	var wg sync.WaitGroup
	for i := range secrets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := readOrCreate()
			if err != nil {
				t.Error(err)
			}
			secrets[i] = s
		}()
	}
	wg.Wait()
	for _, s := range secrets[1:] {
		if !bytes.Equal(s, secrets[0]) || len(s) != secretSize {
			t.Fatalf("the secrets differ: %x, %x", secrets[0], s)
		}
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the secret file: %v, %v", fi.Mode(), err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".cache-secret-*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	// A damaged secret is an error, never a seal made with it.
	if err := os.WriteFile(path, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readOrCreate(); err == nil || !strings.Contains(err.Error(), "holds 5 bytes") {
		t.Errorf("a short secret: %v", err)
	}
}

// Each input of a seal changes it: the domain, the key and the content, and
// where the key ends and the content begins.
func TestSealCoversEveryInput(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	base, err := Seal("jit", []byte("key"), []byte("content"))
	if err != nil {
		t.Fatal(err)
	}
	if !Verify("jit", []byte("key"), []byte("content"), base) {
		t.Fatal("a seal does not verify")
	}
	for name, c := range map[string][3]string{
		"domain":   {"deploy", "key", "content"},
		"key":      {"jit", "kez", "content"},
		"content":  {"jit", "key", "contenT"},
		"boundary": {"jit", "keyc", "ontent"},
	} {
		if Verify(c[0], []byte(c[1]), []byte(c[2]), base) {
			t.Errorf("%s changed, the seal still verifies", name)
		}
	}
}
