// Package cacheseal seals the entries of mneme's compile caches with a secret
// of the installation, so that an entry cannot be forged: a checksum anyone
// can recompute would accept an entry edited and re-sealed (PTX changed, a
// cubin planted under another key) or a cache folder received from
// elsewhere. The seal is HMAC-SHA256 over the entry's key and content under
// a 32-byte secret kept outside every cache folder, in the user's
// configuration folder ($XDG_CONFIG_HOME/mneme/cache-secret, by default
// ~/.config/mneme/cache-secret), created on first use, readable by its
// owner only. Entries sealed by another installation or user are misses.
package cacheseal

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/mneme-gpu/mneme/internal/safefile"
)

// Size is the length of a seal in bytes.
const Size = sha256.Size

// secretSize is the length of the installation's secret.
const secretSize = 32

// SecretPath is the file that holds the secret.
func SecretPath() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("compile cache: no configuration folder for its secret: %w", err)
	}
	return filepath.Join(dir, "mneme", "cache-secret"), nil
}

var (
	secretOnce sync.Once
	secret     []byte
	secretErr  error
)

// loadSecret reads the secret, creating it when there is none yet.
func loadSecret() ([]byte, error) {
	secretOnce.Do(func() { secret, secretErr = readOrCreate() })
	return secret, secretErr
}

func readOrCreate() ([]byte, error) {
	path, err := SecretPath()
	if err != nil {
		return nil, err
	}
	data, err := safefile.ReadFile(path, secretSize)
	if errors.Is(err, os.ErrNotExist) {
		if err := create(path); err != nil {
			return nil, fmt.Errorf("compile cache: creating its secret %s: %w", path, err)
		}
		data, err = safefile.ReadFile(path, secretSize)
	}
	if err != nil {
		return nil, fmt.Errorf("compile cache: its secret: %w", err)
	}
	if len(data) != secretSize {
		return nil, fmt.Errorf("compile cache: its secret %s holds %d bytes, want %d (remove it to make a new one)", path, len(data), secretSize)
	}
	return data, nil
}

// create writes a new secret through a temporary file linked into place:
// processes starting at once (the ranks of a job) all end up with the one
// that was linked first.
func create(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	b := make([]byte, secretSize)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".cache-secret-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return nil
}

// Seal is the seal of an entry of the cache named domain ("jit", "deploy",
// "facts": an entry of one cannot pass for another) with key and content.
func Seal(domain string, key, content []byte) ([]byte, error) {
	s, err := loadSecret()
	if err != nil {
		return nil, err
	}
	m := hmac.New(sha256.New, s)
	for _, part := range [][]byte{[]byte(domain), key} {
		m.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(part))))
		m.Write(part)
	}
	m.Write(content)
	return m.Sum(nil), nil
}

// Verify reports whether seal is the seal of the entry; false also when
// there is no secret to check it with.
func Verify(domain string, key, content, seal []byte) bool {
	want, err := Seal(domain, key, content)
	return err == nil && hmac.Equal(want, seal)
}

// Wrap frames a cache entry as it is stored: a header line of prefix and
// the hex seal of domain, key and body, then body.
func Wrap(domain, prefix, key string, body []byte) ([]byte, error) {
	seal, err := Seal(domain, []byte(key), body)
	if err != nil {
		return nil, err
	}
	return append([]byte(prefix+hex.EncodeToString(seal)+"\n"), body...), nil
}

// Unwrap returns the body of an entry Wrap framed with prefix, and whether
// its seal is the seal of domain, key and that body.
func Unwrap(domain, prefix, key string, data []byte) ([]byte, bool) {
	rest, ok := bytes.CutPrefix(data, []byte(prefix))
	if !ok {
		return nil, false
	}
	stored, body, ok := bytes.Cut(rest, []byte("\n"))
	if !ok || len(stored) != 2*Size {
		return nil, false
	}
	seal, err := hex.DecodeString(string(stored))
	if err != nil {
		return nil, false
	}
	return body, Verify(domain, []byte(key), body, seal)
}
