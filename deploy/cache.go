package deploy

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/zeebo/xxh3"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/internal/cacheseal"
	"github.com/mneme-gpu/mneme/internal/safefile"
)

// CacheDirEnv names the folder of the disk cache; DefaultCacheDir reads it.
const CacheDirEnv = "MNEME_CACHE_DIR"

// DefaultCacheDir is $MNEME_CACHE_DIR, or .mneme-cache under the current
// working directory.
func DefaultCacheDir() string {
	if d := os.Getenv(CacheDirEnv); d != "" {
		return d
	}
	wd, err := os.Getwd()
	if err != nil {
		return ".mneme-cache"
	}
	return filepath.Join(wd, ".mneme-cache")
}

// Key is everything that can change a compiled variant. Two launches with
// equal keys may share one object; any field that differs must give another.
type Key struct {
	// IRHash identifies the kernel's IR module.
	IRHash string
	// Kernel is the mangled name.
	Kernel string
	// Config is ConfigKey of the compile configuration (after ConfigFor).
	Config string
	// Values are the specialized arguments' bytes, each with its index and
	// length (AppendValue); empty when nothing is specialized.
	Values []byte
	// Block and Grid are the launch's dimensions when they are folded into
	// the code (SpecializeDims), zero otherwise.
	Block, Grid mneme.Dim3
	// Arch is the target (sm_90), Driver the CUDA driver version and Ptxas
	// the identity of the assembler: a new one may generate other code.
	Arch   string
	Driver int
	Ptxas  string
}

// keyFormat leads every key's encoding: changing the encoding or what a
// compiled variant depends on changes it, so old entries are never reused.
const keyFormat = "mneme-deploy-key-1/compiler-" + mneme.CompilerRevision

// AppendValue appends a specialized argument, its 0-based index and its
// bytes, to a Key's Values, in an encoding no two different argument lists
// share.
func AppendValue(values []byte, index int, value []byte) []byte {
	values = binary.LittleEndian.AppendUint32(values, uint32(index))
	values = binary.LittleEndian.AppendUint32(values, uint32(len(value)))
	return append(values, value...)
}

// encode is the canonical encoding of the key: each field as a u64
// little-endian length and its bytes, in a fixed order, after keyFormat.
func (k Key) encode() []byte {
	var dims [24]byte
	for i, v := range []uint32{k.Block.X, k.Block.Y, k.Block.Z, k.Grid.X, k.Grid.Y, k.Grid.Z} {
		binary.LittleEndian.PutUint32(dims[4*i:], v)
	}
	var driver [8]byte
	binary.LittleEndian.PutUint64(driver[:], uint64(int64(k.Driver)))
	fields := [][]byte{[]byte(keyFormat), []byte(k.IRHash), []byte(k.Kernel), []byte(k.Config), k.Values,
		dims[:12], dims[12:], []byte(k.Arch), driver[:], []byte(k.Ptxas)}
	n := 0
	for _, f := range fields {
		n += 8 + len(f)
	}
	b := make([]byte, 0, n)
	for _, f := range fields {
		b = binary.LittleEndian.AppendUint64(b, uint64(len(f)))
		b = append(b, f...)
	}
	return b
}

// keyFields is the number of fields encode writes.
const keyFields = 10

// decodeKey reads an encoded key from the front of b and returns the rest.
func decodeKey(b []byte) (Key, []byte, error) {
	var fields [keyFields][]byte
	for i := range fields {
		if len(b) < 8 {
			return Key{}, nil, fmt.Errorf("key truncated in field %d", i)
		}
		n := binary.LittleEndian.Uint64(b)
		b = b[8:]
		if n > uint64(len(b)) {
			return Key{}, nil, fmt.Errorf("key truncated in field %d (%d bytes of %d)", i, len(b), n)
		}
		fields[i], b = b[:n], b[n:]
	}
	if string(fields[0]) != keyFormat {
		return Key{}, nil, fmt.Errorf("key format %q, want %q", fields[0], keyFormat)
	}
	if len(fields[5]) != 12 || len(fields[6]) != 12 || len(fields[8]) != 8 {
		return Key{}, nil, fmt.Errorf("key dimensions or driver version of the wrong size")
	}
	dim := func(d []byte) mneme.Dim3 {
		return mneme.Dim3{X: binary.LittleEndian.Uint32(d), Y: binary.LittleEndian.Uint32(d[4:]), Z: binary.LittleEndian.Uint32(d[8:])}
	}
	k := Key{IRHash: string(fields[1]), Kernel: string(fields[2]), Config: string(fields[3]),
		Block: dim(fields[5]), Grid: dim(fields[6]), Arch: string(fields[7]),
		Driver: int(int64(binary.LittleEndian.Uint64(fields[8]))), Ptxas: string(fields[9])}
	if len(fields[4]) > 0 {
		k.Values = bytes.Clone(fields[4])
	}
	return k, b, nil
}

// Hash is the xxh3-128 of the key's canonical encoding, in hex: the entry's
// file name.
func (k Key) Hash() string { return hashHex(k.encode()) }

func hashHex(b []byte) string {
	sum := xxh3.Hash128(b).Bytes()
	return hex.EncodeToString(sum[:])
}

// launchOnlyKeys are the configuration fields that do not reach the
// compiler: the launch's geometry (in Key.Block and Key.Grid when folded
// in), its shared memory, and Original, under which nothing is compiled.
var launchOnlyKeys = map[string]bool{mneme.KeyGrid: true, mneme.KeyBlock: true, mneme.KeySharedMem: true, mneme.KeyOriginal: true}

// compileFields are the configuration's fields that ConfigKey encodes: all
// but launchOnlyKeys, taken from the configuration's table so a knob added
// there enters the key without an edit here.
var compileFields = func() []mneme.ConfigField {
	var out []mneme.ConfigField
	for _, f := range mneme.ConfigFields() {
		if !launchOnlyKeys[f.Key] {
			out = append(out, f)
		}
	}
	return out
}()

// ConfigKey is the canonical text of the compile configuration: every
// compile knob as key=value; in the configuration's table order, strings
// quoted. Launch bounds (max_threads, min_blocks_per_sm) are in it: leaving
// them out would let a changed tuned value load a stale object, as in
// Proteus.
func ConfigKey(c mneme.Config) string {
	var b strings.Builder
	for _, f := range compileFields {
		b.WriteString(f.Key)
		b.WriteByte('=')
		switch v := f.Get(c).(type) {
		case string:
			b.WriteString(strconv.Quote(v))
		case []int:
			for i, n := range v {
				if i > 0 {
					b.WriteByte(',')
				}
				b.WriteString(strconv.Itoa(n))
			}
		default:
			fmt.Fprint(&b, v)
		}
		b.WriteByte(';')
	}
	return b.String()
}

// Hit says where Get found an entry.
type Hit string

// Where an entry was found; HitNone is a miss.
const (
	HitNone   Hit = ""
	HitMemory Hit = "memory"
	HitDisk   Hit = "disk"
)

// CorruptError is a disk entry that could not be used: Get reports it as a
// miss with this error. An entry of the cache's own format that fails its
// checks is removed, so it is reported once; a folder or link in its place
// is left alone.
type CorruptError struct {
	Path   string
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("compile cache entry %s is not usable (%s): treated as a miss", e.Path, e.Reason)
}

// Cache holds compiled variants in memory and, with a folder, on disk.
//
// Disk layout: <dir>/<first 2 hex digits of Key.Hash>/<Key.Hash>.cubin for
// compiled variants, <dir>/facts/<hash of IR hash and kernel>.json for
// KernelFacts. Every file is written to a temporary file beside it, synced
// and renamed into place, so the processes of one job (MPI ranks) sharing
// the folder never see a torn file, and two writers of one key leave one
// whole entry. A crash can leave a temporary file (.NAME.*.tmp) behind,
// never a wrong entry. Entries are checked on every read (see entry format
// in encodeEntry) and a bad one is a miss, removed best-effort.
type Cache struct {
	dir   string
	mu    sync.Mutex
	mem   map[string][]byte // by Key.encode()
	facts map[string]KernelFacts
}

// NewCache makes a cache on dir; "" keeps it in memory only.
func NewCache(dir string) *Cache {
	return &Cache{dir: dir, mem: map[string][]byte{}, facts: map[string]KernelFacts{}}
}

// Dir is the disk folder, "" for a memory-only cache.
func (c *Cache) Dir() string { return c.dir }

// Entry file format, little-endian.
const (
	entryMagic   = "MNEMEJC1"
	entryVersion = 2
	// maxEntrySize bounds what Get reads: far above any kernel's object.
	maxEntrySize = 1 << 30
	// entryHeader is the magic and the version.
	entryHeader = len(entryMagic) + 4
)

// Seal domains (internal/cacheseal) of compiled variants and of facts.
const (
	entrySealDomain = "deploy"
	factsSealDomain = "deploy-facts"
)

// encodeEntry is a disk entry: the magic "MNEMEJC1", u32 version 2, the
// key's full encoding (compared on read: a hash collision or a misplaced
// file is detected), u64 payload length, the 32-byte seal of the key and
// the payload (internal/cacheseal: keyed with the installation's secret,
// so an entry cannot be forged or brought in from elsewhere), the payload.
func encodeEntry(key, payload []byte) ([]byte, error) {
	seal, err := cacheseal.Seal(entrySealDomain, key, payload)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, entryHeader+len(key)+8+cacheseal.Size+len(payload))
	b = append(b, entryMagic...)
	b = binary.LittleEndian.AppendUint32(b, entryVersion)
	b = append(b, key...)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(payload)))
	b = append(b, seal...)
	return append(b, payload...), nil
}

// decodeEntry checks a disk entry and returns its key and payload (a
// subslice of data); the error says what is wrong. The sizes are checked
// against the file before the seal is computed.
func decodeEntry(data []byte) (Key, []byte, error) {
	if len(data) < entryHeader || string(data[:len(entryMagic)]) != entryMagic {
		return Key{}, nil, errors.New("bad magic")
	}
	if v := binary.LittleEndian.Uint32(data[len(entryMagic):]); v != entryVersion {
		return Key{}, nil, fmt.Errorf("version %d, want %d", v, entryVersion)
	}
	k, rest, err := decodeKey(data[entryHeader:])
	if err != nil {
		return Key{}, nil, err
	}
	if len(rest) < 8+cacheseal.Size {
		return Key{}, nil, errors.New("truncated before the payload")
	}
	n, seal := binary.LittleEndian.Uint64(rest), rest[8:8+cacheseal.Size]
	payload := rest[8+cacheseal.Size:]
	if n != uint64(len(payload)) {
		return Key{}, nil, fmt.Errorf("payload length %d, the file holds %d bytes", n, len(payload))
	}
	if !cacheseal.Verify(entrySealDomain, data[entryHeader:len(data)-len(rest)], payload, seal) {
		return Key{}, nil, errors.New("its seal does not match: damaged, edited or sealed by another installation")
	}
	return k, payload, nil
}

func entryName(hash string) string { return filepath.Join(hash[:2], hash+".cubin") }

// Get returns the compiled variant stored under key and where it was found.
// A miss is (nil, HitNone, nil); a disk entry that is torn, altered or
// holds another key is a miss with a *CorruptError, and is removed. Other
// errors (an unreadable folder) also come with HitNone. The returned bytes
// are shared: do not modify them.
func (c *Cache) Get(key Key) ([]byte, Hit, error) {
	enc := key.encode()
	c.mu.Lock()
	data, ok := c.mem[string(enc)]
	c.mu.Unlock()
	if ok {
		return data, HitMemory, nil
	}
	if c.dir == "" {
		return nil, HitNone, nil
	}
	name := entryName(hashHex(enc))
	raw, err := c.readFile(name, maxEntrySize)
	if err != nil || raw == nil {
		return nil, HitNone, err
	}
	k, payload, err := decodeEntry(raw.data)
	if err == nil && !bytes.Equal(k.encode(), enc) {
		err = errors.New("it holds another key")
	}
	if err != nil {
		raw.discard()
		return nil, HitNone, &CorruptError{Path: raw.path, Reason: err.Error()}
	}
	c.mu.Lock()
	c.mem[string(enc)] = payload
	c.mu.Unlock()
	return payload, HitDisk, nil
}

// Put stores data under key in memory and, with a folder, on disk.
func (c *Cache) Put(key Key, data []byte) error {
	enc := key.encode()
	c.mu.Lock()
	c.mem[string(enc)] = bytes.Clone(data)
	c.mu.Unlock()
	if c.dir == "" {
		return nil
	}
	entry, err := encodeEntry(enc, data)
	if err != nil {
		return err
	}
	return writeAtomic(c.dir, entryName(hashHex(enc)), entry)
}

// cacheFile is a file read from the cache folder, with what identifies it
// so that only that file is removed when it is bad.
type cacheFile struct {
	path string
	info fs.FileInfo
	data []byte
}

// readFile reads name in the cache folder: nil, nil when it does not exist;
// a *CorruptError for a file too large or not regular.
func (c *Cache) readFile(name string, limit int64) (*cacheFile, error) {
	path := filepath.Join(c.dir, name)
	f, info, err := safefile.OpenIn(c.dir, name, limit)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case errors.Is(err, safefile.ErrTooLarge):
		cf := &cacheFile{path: path}
		if fi, err := os.Lstat(path); err == nil {
			cf.info = fi
			cf.discard()
		}
		return nil, &CorruptError{Path: path, Reason: fmt.Sprintf("larger than %d bytes", limit)}
	case errors.Is(err, safefile.ErrNotRegular) || errors.Is(err, safefile.ErrOutside):
		return nil, &CorruptError{Path: path, Reason: err.Error()}
	case err != nil:
		return nil, fmt.Errorf("compile cache: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("compile cache: %s: %w", path, err)
	}
	return &cacheFile{path: path, info: info, data: data}, nil
}

// discard removes the file if it is still the one read: another process
// may have renamed a good entry into its place since.
func (f *cacheFile) discard() {
	if cur, err := os.Lstat(f.path); err == nil && os.SameFile(cur, f.info) {
		os.Remove(f.path)
	}
}

// writeAtomic writes name under dir through a synced temporary file in the
// same folder and a rename, so a reader sees the old file or the whole new
// one. The folder is not synced: a cache entry lost to a machine crash is
// only a miss.
func writeAtomic(dir, name string, data []byte) error {
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("compile cache: %w", err)
	}
	if err := safefile.MkdirIn(dir, filepath.Dir(name)); err != nil {
		return fmt.Errorf("compile cache: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(name)+".*.tmp")
	if err != nil {
		return fmt.Errorf("compile cache: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("compile cache: write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("compile cache: write %s: fsync: %w", path, err)
	}
	// CreateTemp makes the file 0600; an entry is shared like any output.
	if err := tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("compile cache: write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("compile cache: write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("compile cache: write %s: %w", path, err)
	}
	ok = true
	return nil
}
