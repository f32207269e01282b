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

	"github.com/mneme-gpu/mneme/cuda"
	"github.com/mneme-gpu/mneme/llvm"
	"github.com/mneme-gpu/mneme/spec"
)

// keyVersion changes whenever the compiler would produce different code for
// the same inputs, so stale disk entries are never reused.
const keyVersion = "mneme-jit-1"

// Key is the content hash of everything that can change the compiled code:
// the IR, the kernel, the configuration fields that reach the compiler, the
// values folded in, the target and the LLVM version. Launch geometry enters
// only when it is folded into the code, as in Proteus.
func (c *Compiler) Key(req *Request) string {
	cfg := req.Config
	if !cfg.SpecializeDims {
		cfg.Grid, cfg.Block = spec.Dim3{}, spec.Dim3{}
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
		// The cubin comes from the driver's ptxas: a new driver may
		// generate different code, so its version is part of the key.
		v, _ := cuda.DriverVersion()
		write([]byte(fmt.Sprintf("cubin driver %d", v)))
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

// diskCache keeps one JSON file per key. Writes go to a unique temporary file
// renamed into place, so readers never see a partial entry and two processes
// compiling the same key at once both leave a complete, identical entry.
type diskCache struct{ dir string }

func (d *diskCache) path(key string) string {
	return filepath.Join(d.dir, key[:2], key+".json")
}

func (d *diskCache) get(key string) (*Output, error) {
	data, err := os.ReadFile(d.path(key))
	if err != nil {
		return nil, err
	}
	var out Output
	if err := json.Unmarshal(data, &out); err != nil || out.Key != key || len(out.PTX) == 0 {
		return nil, fmt.Errorf("jit cache entry %s is damaged", d.path(key))
	}
	return &out, nil
}

func (d *diskCache) put(key string, out *Output) error {
	p := d.path(key)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	data, err := json.Marshal(out)
	if err != nil {
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
