package deploy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/mneme-gpu/mneme/internal/cacheseal"
	"github.com/zeebo/xxh3"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/mneme-gpu/mneme"
)

func testKey() Key {
	c := mneme.Baseline(mneme.Dim3{}, mneme.Dim3{}, 0)
	c.SetLaunchBounds, c.MaxThreads, c.MinBlocksPerSM = true, 256, 2
	return Key{IRHash: "0123abcd", Kernel: "_Z6vecaddPfS_S_i", Config: ConfigKey(c),
		Values: AppendValue(nil, 3, []byte{0, 4, 0, 0}), Block: dim(256, 1, 1), Grid: dim(4096, 1, 1),
		Arch: "sm_90", Driver: 13000, Ptxas: "driver 580"}
}

func entryPath(c *Cache, k Key) string { return filepath.Join(c.Dir(), entryName(k.Hash())) }

func TestCacheRoundTripMemoryAndDisk(t *testing.T) {
	k, payload := testKey(), []byte("\x7fELF cubin bytes")
	mem := NewCache("")
	if d, hit, err := mem.Get(k); d != nil || hit != HitNone || err != nil {
		t.Fatalf("empty cache: %q %q %v", d, hit, err)
	}
	if err := mem.Put(k, payload); err != nil {
		t.Fatal(err)
	}
	if d, hit, err := mem.Get(k); !bytes.Equal(d, payload) || hit != HitMemory || err != nil {
		t.Fatalf("memory: %q %q %v", d, hit, err)
	}

	dir := filepath.Join(t.TempDir(), "cache")
	c := NewCache(dir)
	buf := bytes.Clone(payload)
	if err := c.Put(k, buf); err != nil {
		t.Fatal(err)
	}
	buf[0] = 'X' // the caller's buffer is not the cache's
	if d, hit, err := c.Get(k); !bytes.Equal(d, payload) || hit != HitMemory || err != nil {
		t.Fatalf("memory after put: %q %q %v", d, hit, err)
	}
	if _, err := os.Stat(entryPath(c, k)); err != nil {
		t.Fatalf("no disk entry: %v", err)
	}
	if !strings.HasPrefix(entryName(k.Hash()), k.Hash()[:2]+string(filepath.Separator)) {
		t.Errorf("layout: %s", entryName(k.Hash()))
	}
	// Another process on the same folder.
	other := NewCache(dir)
	if d, hit, err := other.Get(k); !bytes.Equal(d, payload) || hit != HitDisk || err != nil {
		t.Fatalf("second cache: %q %q %v", d, hit, err)
	}
	if _, hit, _ := other.Get(k); hit != HitMemory {
		t.Errorf("a disk hit is not kept in memory: %q", hit)
	}
	// Another key is a plain miss.
	k2 := k
	k2.Kernel += "x"
	if d, hit, err := other.Get(k2); d != nil || hit != HitNone || err != nil {
		t.Errorf("other key: %q %q %v", d, hit, err)
	}
	// An empty payload is an entry too.
	if err := c.Put(k2, nil); err != nil {
		t.Fatal(err)
	}
	if d, hit, err := NewCache(dir).Get(k2); len(d) != 0 || hit != HitDisk || err != nil {
		t.Errorf("empty payload: %q %q %v", d, hit, err)
	}
	// No temporary files left behind.
	entries, _ := os.ReadDir(filepath.Dir(entryPath(c, k)))
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}

func TestCacheCorruptEntriesAreMisses(t *testing.T) {
	k, payload := testKey(), bytes.Repeat([]byte("cubin"), 50)
	good := mustEncode(t, k.encode(), payload)
	other := testKey()
	other.Arch = "sm_80"
	for _, tc := range []struct {
		name   string
		data   []byte
		reason string
	}{
		{"empty", nil, "bad magic"},
		{"bad magic", append([]byte("MNEMEJC2"), good[8:]...), "bad magic"},
		{"version", append(append([]byte("MNEMEJC1"), 1, 0, 0, 0), good[12:]...), "version 1"},
		{"truncated in the key", good[:40], "key truncated"},
		{"truncated before the payload", good[:len(good)-len(payload)-10], "truncated"},
		{"truncated payload", good[:len(good)-1], "payload length"},
		{"trailing bytes", append(bytes.Clone(good), 0), "payload length"},
		{"flipped payload byte", flip(good, len(good)-7), "seal does not match"},
		{"flipped seal byte", flip(good, len(good)-len(payload)-3), "seal does not match"},
		{"flipped key byte", flip(good, entryHeader+8+len(keyFormat)+8+2), "seal does not match"},
		{"re-sealed with a checksum anyone can compute", resealed(t, good, payload), "seal does not match"},
		{"another key", mustEncode(t, other.encode(), payload), "another key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCache(t.TempDir())
			path := entryPath(c, k)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			d, hit, err := c.Get(k)
			var ce *CorruptError
			if d != nil || hit != HitNone || !errors.As(err, &ce) || ce.Path != path || !strings.Contains(ce.Reason, tc.reason) {
				t.Fatalf("got %d bytes, hit %q, error %v; want a miss for %q", len(d), hit, err, tc.reason)
			}
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the corrupt entry was not removed: %v", err)
			}
			// Reported once: it is gone, so the next Get is a plain miss.
			if d, hit, err := c.Get(k); d != nil || hit != HitNone || err != nil {
				t.Errorf("second get: %q %q %v", d, hit, err)
			}
			// And a Put repairs it.
			if err := c.Put(k, payload); err != nil {
				t.Fatal(err)
			}
			if d, hit, err := NewCache(c.Dir()).Get(k); !bytes.Equal(d, payload) || hit != HitDisk || err != nil {
				t.Errorf("after repair: %q %v", hit, err)
			}
		})
	}
}

func mustSealFacts(t *testing.T, key string, body []byte) []byte {
	t.Helper()
	data, err := sealFacts(key, body)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// mustEncode is encodeEntry for tests.
func mustEncode(t testing.TB, key, payload []byte) []byte {
	t.Helper()
	data, err := encodeEntry(key, payload)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// resealed is entry with its payload changed and the seal replaced by the
// payload's xxh3 (the old format's checksum) padded to a seal's size: what
// a forger who cannot know the secret can compute.
func resealed(t *testing.T, entry, payload []byte) []byte {
	t.Helper()
	forged := bytes.ReplaceAll(bytes.Clone(payload), []byte("cubin"), []byte("cuBin"))
	head := bytes.Clone(entry[:len(entry)-len(payload)-cacheseal.Size])
	seal := make([]byte, cacheseal.Size)
	binary.LittleEndian.PutUint64(seal, xxh3.Hash(forged))
	return append(append(head, seal...), forged...)
}

func flip(b []byte, i int) []byte {
	b = bytes.Clone(b)
	b[i] ^= 0x40
	return b
}

func TestCacheNotRegularEntry(t *testing.T) {
	c := NewCache(t.TempDir())
	k := testKey()
	if err := os.MkdirAll(entryPath(c, k), 0o755); err != nil { // a folder where the entry goes
		t.Fatal(err)
	}
	d, hit, err := c.Get(k)
	var ce *CorruptError
	if d != nil || hit != HitNone || !errors.As(err, &ce) {
		t.Fatalf("folder as entry: %q %q %v", d, hit, err)
	}
}

func TestCacheConcurrentPutsOfOneKey(t *testing.T) {
	dir := t.TempDir()
	k, payload := testKey(), bytes.Repeat([]byte{0xab, 0xcd}, 64<<10)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := 0; i < 32; i++ {
		wg.Add(2)
		go func() { // each its own cache, as separate processes
			defer wg.Done()
			errs <- NewCache(dir).Put(k, payload)
		}()
		go func() { // readers meanwhile never see a torn entry
			defer wg.Done()
			d, hit, err := NewCache(dir).Get(k)
			if err != nil || (hit == HitDisk && !bytes.Equal(d, payload)) {
				errs <- fmt.Errorf("concurrent get: %d bytes, %q, %v", len(d), hit, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if d, hit, err := NewCache(dir).Get(k); !bytes.Equal(d, payload) || hit != HitDisk || err != nil {
		t.Fatalf("after concurrent puts: %d bytes, %q, %v", len(d), hit, err)
	}
	entries, _ := os.ReadDir(filepath.Dir(entryPath(NewCache(dir), k)))
	if len(entries) != 1 {
		t.Errorf("entries: %v", entries)
	}
}

func TestKeyHashCoversEveryField(t *testing.T) {
	base := testKey()
	seen := map[string]string{base.Hash(): "base"}
	v := reflect.ValueOf(base)
	for i := 0; i < v.NumField(); i++ {
		name := v.Type().Field(i).Name
		k := base
		f := reflect.ValueOf(&k).Elem().Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(f.String() + "x")
		case reflect.Int:
			f.SetInt(f.Int() + 1)
		case reflect.Slice:
			f.SetBytes(append(bytes.Clone(f.Bytes()), 1))
		case reflect.Struct: // Dim3
			f.Field(2).SetUint(f.Field(2).Uint() + 1)
		default:
			t.Fatalf("field %s: kind %s not covered by this test", name, f.Kind())
		}
		h := k.Hash()
		if prev, ok := seen[h]; ok {
			t.Errorf("changing %s gives the hash of %s", name, prev)
		}
		seen[h] = name
	}
	// The encoding is length-prefixed: moving bytes between fields changes it.
	a, b := base, base
	a.IRHash, a.Kernel = "ab", "c"
	b.IRHash, b.Kernel = "a", "bc"
	if a.Hash() == b.Hash() {
		t.Error("fields are not delimited")
	}
	if len(base.Hash()) != 32 {
		t.Errorf("hash %q: want 128 bits in hex", base.Hash())
	}
	// Grid and block are separate.
	g, bl := base, base
	g.Grid, g.Block = base.Block, base.Grid
	if g.Hash() == bl.Hash() {
		t.Error("grid and block swap unnoticed")
	}
	// Values keep argument boundaries.
	if bytes.Equal(AppendValue(AppendValue(nil, 0, []byte{1}), 1, []byte{2, 3}), AppendValue(AppendValue(nil, 0, []byte{1, 2}), 1, []byte{3})) {
		t.Error("values are not delimited")
	}
}

func TestConfigKeyCoversEveryCompileKnob(t *testing.T) {
	base := mneme.Baseline(mneme.Dim3{}, mneme.Dim3{}, 0)
	base.SetLaunchBounds, base.MaxThreads = true, 256
	baseKey := ConfigKey(base)
	covered := map[string]bool{}
	for _, f := range mneme.ConfigFields() {
		c := base
		var v any
		switch f.Kind {
		case mneme.ValueDim3:
			v = "7,7,7"
		case mneme.ValueUint, mneme.ValueInt:
			n, _ := f.Get(c).(int)
			v = n + 1
			if f.Key == mneme.KeySharedMem {
				v = 64
			}
		case mneme.ValueBool:
			b, _ := f.Get(c).(bool)
			v = !b
		case mneme.ValueString:
			v = "on"
			if f.Key == mneme.KeyPasses {
				v = "default<O2>"
			}
		case mneme.ValueInts:
			v = []any{1}
		}
		if err := f.Set(&c, v); err != nil {
			t.Fatalf("%s: %v", f.Key, err)
		}
		changed := ConfigKey(c) != baseKey
		if want := !launchOnlyKeys[f.Key]; changed != want {
			t.Errorf("%s: key changed %v, want %v", f.Key, changed, want)
		}
		covered[f.Key] = changed
	}
	for _, key := range []string{mneme.KeyMaxThreads, mneme.KeyMinBlocksPerSM, mneme.KeyPasses, mneme.KeyCodegenOpt,
		mneme.KeySpecialize, mneme.KeySpecializeDims, mneme.KeySetLaunchBounds, mneme.KeyPtxasOpt, mneme.KeyMaxRegisters} {
		if !covered[key] {
			t.Errorf("%s is not in the configuration key", key)
		}
	}
	// Strings are quoted: a value cannot forge another field.
	forged := base
	forged.Passes = `x";codegen_opt=0;`
	if strings.Contains(ConfigKey(forged), `passes=x";codegen_opt=0;`) {
		t.Errorf("an unquoted string: %s", ConfigKey(forged))
	}
	// The key of a Proteus plan changes with its tuned launch bounds.
	p := &Plan{Config: base, Proteus: true}
	q := &Plan{Config: base, Proteus: true}
	q.Config.MaxThreads = 512
	if ConfigKey(p.ConfigFor(dim(256, 1, 1))) == ConfigKey(q.ConfigFor(dim(256, 1, 1))) {
		t.Error("a changed TunedMaxThreads keeps the key (Proteus's stale-object bug)")
	}
}

func TestFactsCache(t *testing.T) {
	dir := t.TempDir()
	c := NewCache(dir)
	if _, ok := c.GetFacts("ir", "_Z1kv"); ok {
		t.Fatal("facts in an empty cache")
	}
	facts := &KernelFacts{ScalarArgs: []int{2}, ArgSizes: []int{8, 8, 4}, Globals: []Global{{Name: "table", AddressSpace: 4, ReadOnly: true}}}
	if err := c.PutFacts("ir", "_Z1kv", facts); err != nil {
		t.Fatal(err)
	}
	got, ok := NewCache(dir).GetFacts("ir", "_Z1kv")
	if !ok || !reflect.DeepEqual(got, facts) {
		t.Fatalf("facts from disk: %+v %v", got, ok)
	}
	got.ArgSizes[0] = 99 // the caller's copy
	if again, _ := c.GetFacts("ir", "_Z1kv"); again.ArgSizes[0] != 8 {
		t.Error("GetFacts shares its memory")
	}
	if _, ok := NewCache(dir).GetFacts("ir2", "_Z1kv"); ok {
		t.Error("facts of another module")
	}
	for _, bad := range []*KernelFacts{
		{ScalarArgs: []int{3}, ArgSizes: []int{8, 8, 4}},
		{ScalarArgs: []int{1, 1}, ArgSizes: []int{8, 8, 4}},
		{ArgSizes: []int{-1}},
		{Globals: []Global{{}}},
		nil,
	} {
		if err := c.PutFacts("ir", "_Z2bad", bad); err == nil {
			t.Errorf("facts %+v accepted", bad)
		}
	}

	key := factsKey("ir", "_Z1kv")
	path := filepath.Join(dir, factsName(key))
	sealedGood, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	good, ok := openFacts(key, sealedGood)
	if !ok {
		t.Fatal("the facts file as written does not verify")
	}
	// A valid edit, not sealed here (forged, or from another installation's
	// cache): refused; sealed here: read.
	edit := strings.Replace(string(good), `"scalar_args":[2]`, `"scalar_args":[1]`, 1)
	if err := os.WriteFile(path, []byte(strings.Replace(string(sealedGood), string(good), edit, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if f, ok := NewCache(dir).GetFacts("ir", "_Z1kv"); ok {
		t.Errorf("facts edited without their seal read back: %+v", f)
	}
	if err := os.WriteFile(path, mustSealFacts(t, key, []byte(edit)), 0o644); err != nil {
		t.Fatal(err)
	}
	if f, ok := NewCache(dir).GetFacts("ir", "_Z1kv"); !ok || !reflect.DeepEqual(f.ScalarArgs, []int{1}) {
		t.Errorf("facts sealed here: %+v %v", f, ok)
	}
	// Malformed facts are refused even when sealed.
	for name, data := range map[string]string{
		"not JSON":      `{"format":`,
		"other kernel":  strings.Replace(string(good), "_Z1kv", "_Z1jv", 1),
		"other format":  strings.Replace(string(good), factsFormat, "mneme-facts-0", 1),
		"unknown field": strings.Replace(string(good), `{"format"`, `{"extra":1,"format"`, 1),
		"bad index":     strings.Replace(string(good), `"scalar_args":[2]`, `"scalar_args":[7]`, 1),
		"twice a key":   strings.Replace(string(good), `{"format"`, `{"kernel":"_Z1kv","format"`, 1),
		"trailing data": string(good) + "{}",
	} {
		if data == string(good) {
			t.Fatalf("%s: the test did not alter the file", name)
		}
		if err := os.WriteFile(path, mustSealFacts(t, key, []byte(data)), 0o644); err != nil {
			t.Fatal(err)
		}
		if f, ok := NewCache(dir).GetFacts("ir", "_Z1kv"); ok {
			t.Errorf("%s: malformed facts read back: %+v", name, f)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: the malformed file was not removed", name)
		}
	}
}

func TestDefaultCacheDir(t *testing.T) {
	t.Setenv(CacheDirEnv, "/scratch/cache")
	if d := DefaultCacheDir(); d != "/scratch/cache" {
		t.Errorf("with %s: %s", CacheDirEnv, d)
	}
	t.Setenv(CacheDirEnv, "")
	wd, _ := os.Getwd()
	if d := DefaultCacheDir(); d != filepath.Join(wd, ".mneme-cache") {
		t.Errorf("default: %s", d)
	}
}

// FuzzCacheEntry reads arbitrary bytes as a disk entry: decoding never
// panics, and whatever it accepts re-encodes to exactly those bytes, so no
// altered or torn file is ever taken for an entry.
func FuzzCacheEntry(f *testing.F) {
	k := testKey()
	good := mustEncode(f, k.encode(), []byte("payload"))
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add(mustEncode(f, Key{}.encode(), nil))
	f.Add([]byte("MNEMEJC1\x01\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		key, payload, err := decodeEntry(data)
		if err != nil {
			if payload != nil {
				t.Fatal("payload with an error")
			}
			return
		}
		if again := mustEncode(t, key.encode(), payload); !bytes.Equal(again, data) {
			t.Fatalf("accepted an entry that does not re-encode identically:\n%x\n%x", data, again)
		}
		// Through the cache: an entry is returned only for its own key.
		c := NewCache(t.TempDir())
		path := entryPath(c, k)
		os.MkdirAll(filepath.Dir(path), 0o755)
		os.WriteFile(path, data, 0o644)
		d, hit, err := c.Get(k)
		if hit != HitNone && (!bytes.Equal(key.encode(), k.encode()) || !bytes.Equal(d, payload) || err != nil) {
			t.Fatalf("returned %d bytes for another key", len(d))
		}
	})
}

// A key names the compiler's revision, so code compiled by an older
// compiler (other float folding, say) is never served from a warm cache.
func TestKeyNamesTheCompilerRevision(t *testing.T) {
	enc := Key{IRHash: "ir", Kernel: "k", Config: "c", Arch: "sm_90"}.encode()
	if !bytes.Contains(enc, []byte("compiler-"+mneme.CompilerRevision)) {
		t.Fatalf("key encoding %q does not name compiler revision %s", enc, mneme.CompilerRevision)
	}
}
