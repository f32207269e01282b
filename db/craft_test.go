package db

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/zeebo/xxh3"
)

// A crafted snapshot passes the metadata checksum, which is unkeyed: anyone
// who edits an address or size can recompute it. reseal does that, walking
// the layout of FORMAT.md independently of the decoder, so the tests below
// reach the bounds checks behind the checksum as a hostile file would.

// layout walks a snapshot's metadata and returns the offsets of its fields
// by name ("blob0.addr", "global1.size", "arg0.size", "trailer"), or false
// where the declared sizes run past the end of data.
func layout(data []byte) (map[string]int, bool) {
	off := map[string]int{}
	at := headerSize
	if len(data) < at {
		return nil, false
	}
	chunk := int(binary.LittleEndian.Uint32(data[16:]))
	if chunk <= 0 {
		return nil, false
	}
	u64 := func(name string) (uint64, bool) {
		if at+8 > len(data) {
			return 0, false
		}
		off[name] = at
		at += 8
		return binary.LittleEndian.Uint64(data[at-8:]), true
	}
	payload := func(n uint64) bool {
		for left := n; left > 0; {
			if at+chunkHeader > len(data) {
				return false
			}
			at += chunkHeader + int(binary.LittleEndian.Uint32(data[at+4:]))
			left -= min(left, uint64(chunk))
		}
		return at <= len(data)
	}
	section := func(what string, entry func(i int) bool) bool {
		n, ok := u64("n" + what)
		if !ok || n > uint64(len(data)) {
			return false
		}
		for i := range int(n) {
			if !entry(i) {
				return false
			}
		}
		return true
	}
	ok := section("globals", func(i int) bool {
		p := fmt.Sprintf("global%d.", i)
		n, ok := u64(p + "namelen")
		if !ok || n > uint64(len(data)-at) {
			return false
		}
		at += int(n)
		size, ok := u64(p + "size")
		if _, ok2 := u64(p + "addr"); !ok || !ok2 {
			return false
		}
		return payload(size)
	}) && section("blobs", func(i int) bool {
		p := fmt.Sprintf("blob%d.", i)
		_, ok1 := u64(p + "rounded")
		size, ok2 := u64(p + "size")
		_, ok3 := u64(p + "addr")
		if !ok1 || !ok2 || !ok3 || !payload(size) {
			return false
		}
		n, ok := u64(p + "metalen")
		if !ok || n > uint64(len(data)-at) {
			return false
		}
		at += int(n)
		return true
	}) && section("args", func(i int) bool {
		size, ok := u64(fmt.Sprintf("arg%d.size", i))
		return ok && payload(size)
	})
	if !ok || at+len(trailerMagic)+8 > len(data) {
		return nil, false
	}
	off["trailer"] = at
	return off, true
}

// reseal recomputes the metadata checksum of data in place: xxh3 of every
// byte up to and including the trailer magic except the chunks' stored bytes.
func reseal(data []byte) bool {
	off, ok := layout(data)
	if !ok {
		return false
	}
	h := xxh3.New()
	chunk := int(binary.LittleEndian.Uint32(data[16:]))
	// Hash everything, skipping stored bytes: walk again with the chunk
	// headers, whose positions layout found implicitly.
	at := 0
	hashPayload := func(n uint64) {
		for left := n; left > 0; {
			stored := int(binary.LittleEndian.Uint32(data[at+4:]))
			h.Write(data[at : at+chunkHeader])
			at += chunkHeader + stored
			left -= min(left, uint64(chunk))
		}
	}
	take := func(n int) { h.Write(data[at : at+n]); at += n }
	u64 := func() uint64 { v := binary.LittleEndian.Uint64(data[at:]); take(8); return v }
	take(headerSize)
	for range u64() {
		take(int(u64()))
		size := u64()
		u64()
		hashPayload(size)
	}
	for range u64() {
		u64()
		size := u64()
		u64()
		hashPayload(size)
		take(int(u64()))
	}
	for range u64() {
		hashPayload(u64())
	}
	if at != off["trailer"] {
		return false
	}
	take(len(trailerMagic))
	binary.LittleEndian.PutUint64(data[at:], h.Sum64())
	return true
}

func encodeForCraft(t testing.TB, s *Snapshot) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := EncodeSnapshot(&buf, s, SnapshotOptions{ChunkSize: 4096}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestResealIsFaithful: reseal of an untouched file leaves it as written,
// so a crafted file's only difference is what the test changed.
func TestResealIsFaithful(t *testing.T) {
	for _, data := range smallSnapshots(t) {
		again := bytes.Clone(data)
		if !reseal(again) || !bytes.Equal(again, data) {
			t.Fatalf("reseal changed a snapshot the encoder wrote")
		}
	}
}

// TestCraftedSnapshotsFailBoundsChecks edits addresses and sizes of valid
// snapshots, reseals them so the checksum passes, and expects each to be
// refused as corrupt with the reason.
func TestCraftedSnapshotsFailBoundsChecks(t *testing.T) {
	const top = ^uint64(0)
	two := &Snapshot{
		Globals: []Global{{Name: "g", Addr: 0x10, Size: 5, Data: []byte("hello")}, {Name: "h", Addr: 0x20, Size: 3, Data: []byte("abc")}},
		Blobs: []Blob{{Addr: 0x10000, Size: 9000, Data: randomData(9000, 1)},
			{Addr: 0x20000, Size: 100, Data: randomData(100, 2)}},
		Args: [][]byte{{1, 2, 3, 4}},
	}
	for _, c := range []struct {
		name  string
		edit  map[string]uint64
		wants string
	}{
		// A blob that ends past the top of the address space wraps around.
		{"blob at the top", map[string]uint64{"blob0.addr": top - 4095}, "overflows"},
		{"blob ending at 2^64", map[string]uint64{"blob1.addr": top - 99}, "overflows"},
		{"global at the top", map[string]uint64{"global0.addr": top - 2}, "overflows"},
		{"global ending at 2^64", map[string]uint64{"global1.addr": top - 2}, "overflows"},
		{"blobs overlap", map[string]uint64{"blob1.addr": 0x10000 + 8999}, "overlap"},
		{"rounded size not rounded", map[string]uint64{"blob0.rounded": 9000}, "rounded"},
		{"rounded size a page short", map[string]uint64{"blob0.rounded": 8192}, "rounded"},
		{"rounded size a page long", map[string]uint64{"blob0.rounded": 16384}, "rounded"},
		{"blob metadata past the end", map[string]uint64{"blob1.metalen": 1 << 40}, ""},
		{"more blobs than the file holds", map[string]uint64{"nblobs": 1 << 40}, ""},
		{"argument longer than its payload", map[string]uint64{"arg0.size": 5000}, ""},
		{"global larger than its chunks", map[string]uint64{"global0.size": 4097}, ""},
	} {
		data := encodeForCraft(t, two)
		off, ok := layout(data)
		if !ok {
			t.Fatal("layout of a written snapshot failed")
		}
		for field, v := range c.edit {
			binary.LittleEndian.PutUint64(data[off[field]:], v)
		}
		// Edits that move the layout cannot be resealed; they must fail
		// before the checksum is reached or at it.
		resealed := reseal(data)
		_, err := DecodeSnapshotBytes(data)
		if err == nil || !errors.Is(err, ErrCorruptSnapshot) {
			t.Errorf("%s: decoded (%v), want a corrupt-snapshot error", c.name, err)
			continue
		}
		if c.wants != "" && (!resealed || !strings.Contains(err.Error(), c.wants)) {
			t.Errorf("%s: resealed %v, error %q, want one saying %q", c.name, resealed, err, c.wants)
		}
		if resealed && strings.Contains(err.Error(), "metadata checksum") {
			t.Errorf("%s: a resealed file failed the checksum: %v", c.name, err)
		}
	}
	// Right up to the top is fine: the last byte at 2^64-1.
	data := encodeForCraft(t, two)
	off, _ := layout(data)
	binary.LittleEndian.PutUint64(data[off["blob1.addr"]:], top-100)
	binary.LittleEndian.PutUint64(data[off["global1.addr"]:], top-3)
	if !reseal(data) {
		t.Fatal("reseal")
	}
	s, err := DecodeSnapshotBytes(data)
	if err != nil {
		t.Fatalf("a blob and a global ending at the last address: %v", err)
	}
	if s.Blobs[1].Addr != top-100 || s.Globals[1].Addr != top-3 || !bytes.Equal(s.Blobs[1].Data, two.Blobs[1].Data) {
		t.Errorf("decoded %+v", s.Blobs[1])
	}
}

// craftedSeeds are hostile snapshots that pass the metadata checksum, for
// the fuzz targets: mutations of them start behind the checksum.
func craftedSeeds(t testing.TB) [][]byte {
	var out [][]byte
	base := &Snapshot{Globals: []Global{{Name: "g", Addr: 0x10, Size: 5, Data: []byte("hello")}},
		Blobs: []Blob{{Addr: 0x10000, Size: 9000, Data: randomData(9000, 1)}, {Addr: 0x20000, Size: 100, Data: randomData(100, 2)}}}
	for _, edit := range []map[string]uint64{
		{"blob0.addr": ^uint64(0) - 4095},
		{"global0.addr": ^uint64(0) - 2},
		{"blob1.addr": 0x10000 + 8999},
		{"blob0.rounded": 8192},
		{"blob1.addr": ^uint64(0) - 100},
	} {
		data := encodeForCraft(t, base)
		off, _ := layout(data)
		for f, v := range edit {
			binary.LittleEndian.PutUint64(data[off[f]:], v)
		}
		if !reseal(data) {
			t.Fatal("reseal of a crafted seed")
		}
		out = append(out, data)
	}
	return out
}

// FuzzDecodeResealed reseals every input it can lay out before decoding, so
// the fuzzer's edits to addresses and sizes pass the checksum as a crafted
// file's would and meet the bounds checks (without skipping the checksum
// check in the decoder).
func FuzzDecodeResealed(f *testing.F) {
	for _, s := range append(smallSnapshots(f), craftedSeeds(f)...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !reseal(data) {
			return
		}
		s, err := DecodeSnapshot(bytes.NewReader(data), 1<<24)
		if err == nil {
			checkDecoded(t, s)
			for _, b := range s.Blobs {
				if b.Addr+b.Size < b.Addr {
					t.Fatalf("blob 0x%x size %d wraps around", b.Addr, b.Size)
				}
			}
			for _, g := range s.Globals {
				if g.Addr+g.Size < g.Addr {
					t.Fatalf("global %q 0x%x size %d wraps around", g.Name, g.Addr, g.Size)
				}
			}
		} else if strings.Contains(err.Error(), "metadata checksum") {
			t.Fatalf("a resealed file failed the checksum: %v", err)
		}
	})
}

// insert returns data with extra inserted at off.
func insert(data []byte, off int, extra []byte) []byte {
	return append(append(append([]byte(nil), data[:off]...), extra...), data[off:]...)
}

// TestSnapshotLimitsAreExact decodes crafted snapshots exactly at each
// declared limit (accepted) and one past it (refused), so an off-by-one in
// a bound shows.
func TestSnapshotLimitsAreExact(t *testing.T) {
	decode := func(data []byte) error {
		t.Helper()
		if !reseal(data) {
			t.Fatal("reseal")
		}
		_, err := DecodeSnapshotBytes(data)
		return err
	}
	// A global's name: maxNameLen bytes, then one more.
	name := strings.Repeat("n", maxNameLen)
	data := encodeForCraft(t, &Snapshot{Globals: []Global{{Name: name, Addr: 0x10, Size: 1, Data: []byte{7}}}})
	if err := decode(data); err != nil {
		t.Errorf("name of %d bytes: %v", maxNameLen, err)
	}
	off, _ := layout(data)
	data = insert(data, off["global0.namelen"]+8, []byte("n"))
	binary.LittleEndian.PutUint64(data[off["global0.namelen"]:], maxNameLen+1)
	if err := decode(data); err == nil || !errors.Is(err, ErrCorruptSnapshot) {
		t.Errorf("name of %d bytes: %v", maxNameLen+1, err)
	}
	// A blob's reserved metadata: maxMetaLen bytes, then one more.
	base := encodeForCraft(t, &Snapshot{Blobs: []Blob{{Addr: 0x1000, Size: 16, Data: randomData(16, 3)}}})
	for _, n := range []int{maxMetaLen, maxMetaLen + 1} {
		off, _ := layout(base)
		data := insert(base, off["blob0.metalen"]+8, make([]byte, n))
		binary.LittleEndian.PutUint64(data[off["blob0.metalen"]:], uint64(n))
		if err := decode(data); (err == nil) != (n == maxMetaLen) {
			t.Errorf("blob metadata of %d bytes: %v", n, err)
		}
	}
	// An argument: maxArgSize bytes, then one more (a raw chunk of one byte
	// appended to its payload).
	arg := randomData(maxArgSize, 4)
	data = encodeForCraft(t, &Snapshot{Args: [][]byte{arg}})
	if err := decode(data); err != nil {
		t.Errorf("argument of %d bytes: %v", maxArgSize, err)
	}
	off, _ = layout(data)
	last := []byte{9}
	chunk := make([]byte, chunkHeader, chunkHeader+1)
	binary.LittleEndian.PutUint32(chunk[4:], 1)
	binary.LittleEndian.PutUint64(chunk[8:], xxh3.Hash(last))
	data = insert(data, off["trailer"], append(chunk, last...))
	binary.LittleEndian.PutUint64(data[off["arg0.size"]:], maxArgSize+1)
	if err := decode(data); err == nil || !strings.Contains(err.Error(), "argument 0") {
		t.Errorf("argument of %d bytes: %v", maxArgSize+1, err)
	}
	// Empty allocations and globals are valid, wherever they sit.
	empty := &Snapshot{Globals: []Global{{Name: "e", Addr: ^uint64(0), Size: 0, Data: []byte{}}},
		Blobs: []Blob{{Addr: 0x1000, Size: 0, Data: []byte{}}, {Addr: 0x1000, Size: 4, Data: []byte{1, 2, 3, 4}}}}
	s, err := DecodeSnapshotBytes(encodeForCraft(t, empty))
	if err != nil || len(s.Blobs) != 2 || s.Blobs[0].Size != 0 || s.Globals[0].Addr != ^uint64(0) {
		t.Errorf("empty blob and global: %+v %v", s, err)
	}
	// The reader's length limit is inclusive.
	data = encodeForCraft(t, &Snapshot{Args: [][]byte{{1}}})
	if _, err := DecodeSnapshot(bytes.NewReader(data), int64(len(data))); err != nil {
		t.Errorf("a snapshot of exactly the limit: %v", err)
	}
	if _, err := DecodeSnapshot(bytes.NewReader(data), int64(len(data)-1)); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("a snapshot one byte over the limit: %v", err)
	}
}
