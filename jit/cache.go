package jit

import (
	"container/list"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/zeebo/xxh3"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/internal/cacheseal"
	"github.com/mneme-gpu/mneme/internal/safefile"
	"github.com/mneme-gpu/mneme/llvm"
)

// keyVersion changes whenever the compiler would produce different code for
// the same inputs, so stale disk entries are never reused.
const keyVersion = "mneme-jit-" + mneme.CompilerRevision

// Key is the content hash of everything that can change the compiled code:
// the IR, the kernel, the configuration fields that reach the compiler, the
// values folded in, the target and the LLVM version. Launch geometry enters
// only when it is folded into the code, as in Proteus.
func (c *Compiler) Key(req *Request) string {
	cfg := req.Config
	if !cfg.SpecializeDims {
		cfg.Grid, cfg.Block = mneme.Dim3{}, mneme.Dim3{}
	}
	cfg.SharedMem = 0 // dynamic shared memory is a launch parameter, not code
	cfg.Passes = pipeline(cfg)
	cfg.Arch = c.arch(req.Config)
	if !cfg.SetLaunchBounds {
		cfg.MaxThreads, cfg.MinBlocksPerSM = 0, 0
	}
	if !cfg.Specialize {
		cfg.SpecializeArgs = nil
	}
	h := xxh3.New()
	write := func(b []byte) {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	write([]byte(keyVersion))
	write([]byte(llvm.Version()))
	ir := xxh3.Hash128(req.IR).Bytes()
	write(ir[:])
	write([]byte(req.Kernel))
	cj, _ := json.Marshal(cfg) // plain data: cannot fail
	write(cj)
	if cfg.Internalize {
		keep := slices.Sorted(slices.Values(req.Keep))
		write([]byte(strings.Join(keep, "\x00")))
	}
	for i, a := range req.Args {
		if cfg.Specializes(i) {
			write([]byte{1})
			write(a)
		} else {
			write([]byte{0})
		}
	}
	if c.Linking() {
		// A new ptxas may generate different code, so which one and its
		// version are part of the key.
		write([]byte("cubin " + c.ptxasIdentity()))
	}
	sum := h.Sum128().Bytes()
	return hex.EncodeToString(sum[:])
}

// memoryCache is a small LRU of compiled outputs.
type memoryCache struct {
	mu    sync.Mutex
	max   int
	order *list.List // front = most recent; values are *memEntry
	byKey map[string]*list.Element
}

type memEntry struct {
	key string
	out *Output
}

func newMemoryCache(max int) *memoryCache {
	return &memoryCache{max: max, order: list.New(), byKey: map[string]*list.Element{}}
}

func (m *memoryCache) get(key string) (*Output, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.byKey[key]
	if !ok {
		return nil, false
	}
	m.order.MoveToFront(e)
	return e.Value.(*memEntry).out, true
}

func (m *memoryCache) put(key string, out *Output) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.byKey[key]; ok {
		e.Value.(*memEntry).out = out
		m.order.MoveToFront(e)
		return
	}
	m.byKey[key] = m.order.PushFront(&memEntry{key, out})
	for m.order.Len() > m.max {
		last := m.order.Back()
		m.order.Remove(last)
		delete(m.byKey, last.Value.(*memEntry).key)
	}
}

// diskCache keeps one file per key: a header line holding the seal of the
// key and the JSON entry that follows it (internal/cacheseal: keyed with a
// secret of the installation, so an entry edited and re-sealed, or brought
// in from another machine's cache, is not served). Writes go to a unique
// temporary file renamed into place, so readers never see a partial entry
// and two processes compiling the same key at once both leave a complete,
// identical entry. An entry whose seal does not match is a miss.
type diskCache struct{ dir string }

// entryMagic starts every cache entry; the hex seal follows it.
const entryMagic = "mneme-jit-entry hmac-sha256:"

// sealDomain tells the seals of this cache from those of the others.
const sealDomain = "jit"

// maxCacheEntry bounds an entry read back: far above any kernel's PTX and cubin.
const maxCacheEntry = 256 << 20

func (d *diskCache) path(key string) string {
	return filepath.Join(d.dir, d.name(key))
}

func (d *diskCache) name(key string) string {
	return filepath.Join(key[:2], key+".json")
}

func (d *diskCache) get(key string) (*Output, error) {
	// A regular file inside the cache directory, of bounded size.
	data, err := safefile.ReadFileIn(d.dir, d.name(key), maxCacheEntry)
	if err != nil {
		return nil, err
	}
	body, ok := verifyEntry(key, data)
	if !ok {
		return nil, fmt.Errorf("jit cache entry %s is damaged, was edited or was sealed elsewhere: its seal does not match", d.path(key))
	}
	var out Output
	if err := json.Unmarshal(body, &out); err != nil || out.Key != key || len(out.PTX) == 0 {
		return nil, fmt.Errorf("jit cache entry %s is damaged", d.path(key))
	}
	return &out, nil
}

// sealEntry prefixes an entry's JSON with the seal of key and the JSON.
func sealEntry(key string, body []byte) ([]byte, error) {
	return cacheseal.Wrap(sealDomain, entryMagic, key, body)
}

// verifyEntry returns the JSON of an entry of key whose seal matches.
func verifyEntry(key string, data []byte) ([]byte, bool) {
	return cacheseal.Unwrap(sealDomain, entryMagic, key, data)
}

func (d *diskCache) put(key string, out *Output) error {
	p := d.path(key)
	if err := os.MkdirAll(d.dir, 0o755); err != nil {
		return err
	}
	// The entry's folder must not be a link out of the cache directory.
	if err := safefile.MkdirIn(d.dir, key[:2]); err != nil {
		return err
	}
	data, err := json.Marshal(out)
	if err != nil {
		return err
	}
	if data, err = sealEntry(key, data); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".tmp-"+key[:8]+"-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}
