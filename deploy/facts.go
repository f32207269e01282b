package deploy

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"

	"github.com/mneme-gpu/mneme/internal/cacheseal"
	"github.com/mneme-gpu/mneme/internal/jsonfield"
)

// KernelFacts are what the runtime learns about a kernel from its IR before
// it can specialize a launch; cached so later runs skip reading the IR.
type KernelFacts struct {
	// ScalarArgs are the 0-based indices of the specializable arguments.
	ScalarArgs []int `json:"scalar_args"`
	// ArgSizes are the byte sizes of the arguments, in order.
	ArgSizes []int `json:"arg_sizes"`
	// Globals are the device globals the kernel's code keeps its own
	// copies of (Global is in protocol.go).
	Globals []Global `json:"globals"`
}

// factsFormat marks a facts file; a change of KernelFacts changes it.
const factsFormat = "mneme-facts-2"

// maxFactsSize bounds a facts file read back.
const maxFactsSize = 16 << 20

// factsFile is a facts file: the facts and whose they are, so a file that
// is not the kernel's is detected.
type factsFile struct {
	Format string `json:"format"`
	IRHash string `json:"ir_hash"`
	Kernel string `json:"kernel"`
	KernelFacts
}

// check refuses facts no kernel has: negative sizes, scalar indices out of
// the argument list or repeated, unnamed globals.
func (f *KernelFacts) check() error {
	for i, n := range f.ArgSizes {
		if n < 0 {
			return fmt.Errorf("arg_sizes[%d] %d: negative", i, n)
		}
	}
	seen := make(map[int]bool, len(f.ScalarArgs))
	for i, a := range f.ScalarArgs {
		if a < 0 || a >= len(f.ArgSizes) {
			return fmt.Errorf("scalar_args[%d] %d: not an argument index (the kernel has %d)", i, a, len(f.ArgSizes))
		}
		if seen[a] {
			return fmt.Errorf("scalar_args[%d] %d: repeated", i, a)
		}
		seen[a] = true
	}
	for i, g := range f.Globals {
		if g.Name == "" {
			return fmt.Errorf("globals[%d]: empty name", i)
		}
	}
	return nil
}

func (f KernelFacts) clone() KernelFacts {
	return KernelFacts{ScalarArgs: slices.Clone(f.ScalarArgs), ArgSizes: slices.Clone(f.ArgSizes), Globals: slices.Clone(f.Globals)}
}

// factsKey identifies a kernel of a module: both, length-prefixed.
func factsKey(irHash, kernel string) string {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(irHash)))
	b = append(b, irHash...)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(kernel)))
	return string(append(b, kernel...))
}

func factsName(key string) string { return filepath.Join("facts", hashHex([]byte(key))+".json") }

// GetFacts returns the facts of kernel in the module irHash, from memory or
// disk. A file that is malformed, fails the checks or names another kernel
// is a miss, and is removed.
func (c *Cache) GetFacts(irHash, kernel string) (*KernelFacts, bool) {
	key := factsKey(irHash, kernel)
	c.mu.Lock()
	f, ok := c.facts[key]
	c.mu.Unlock()
	if ok {
		f = f.clone()
		return &f, true
	}
	if c.dir == "" {
		return nil, false
	}
	raw, err := c.readFile(factsName(key), maxFactsSize)
	if err != nil || raw == nil {
		return nil, false
	}
	body, sealed := openFacts(key, raw.data)
	ff, err := decodeFacts(body)
	if !sealed || err != nil || ff.IRHash != irHash || ff.Kernel != kernel {
		raw.discard()
		return nil, false
	}
	c.mu.Lock()
	c.facts[key] = ff.KernelFacts.clone()
	c.mu.Unlock()
	return &ff.KernelFacts, true
}

// decodeFacts reads a facts file strictly: one object, known fields, no
// key twice, facts that pass check.
func decodeFacts(data []byte) (*factsFile, error) {
	if err := jsonfield.Check(data); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var ff factsFile
	if err := dec.Decode(&ff); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the object")
	}
	if ff.Format != factsFormat {
		return nil, fmt.Errorf("format %q, want %q", ff.Format, factsFormat)
	}
	if err := ff.check(); err != nil {
		return nil, err
	}
	return &ff, nil
}

// PutFacts stores the facts of kernel in the module irHash in memory and,
// with a folder, on disk. Facts that fail the checks GetFacts applies are
// refused.
func (c *Cache) PutFacts(irHash, kernel string, facts *KernelFacts) error {
	if facts == nil {
		return errors.New("kernel facts: nil")
	}
	if err := facts.check(); err != nil {
		return fmt.Errorf("kernel facts of %s: %w", kernel, err)
	}
	key := factsKey(irHash, kernel)
	c.mu.Lock()
	c.facts[key] = facts.clone()
	c.mu.Unlock()
	if c.dir == "" {
		return nil
	}
	data, err := json.Marshal(factsFile{Format: factsFormat, IRHash: irHash, Kernel: kernel, KernelFacts: *facts})
	if err != nil {
		return err
	}
	sealed, err := sealFacts(key, append(data, '\n'))
	if err != nil {
		return err
	}
	return writeAtomic(c.dir, factsName(key), sealed)
}

// factsSealPrefix starts a facts file's first line, the seal of its key
// and of the JSON that follows (internal/cacheseal): facts decide which
// arguments a variant folds, so a forged file must not be believed.
const factsSealPrefix = "mneme-facts hmac-sha256:"

func sealFacts(key string, body []byte) ([]byte, error) {
	return cacheseal.Wrap(factsSealDomain, factsSealPrefix, key, body)
}

// openFacts returns the JSON of a facts file of key and whether its seal
// matches.
func openFacts(key string, data []byte) ([]byte, bool) {
	return cacheseal.Unwrap(factsSealDomain, factsSealPrefix, key, data)
}
