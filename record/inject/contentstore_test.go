package inject

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/mneme-gpu/mneme/db"
)

// A launch that changes one chunk of a 3 MiB allocation: the epilogue
// stores that chunk and references the prologue's copies of the others
// (and of the allocation it did not touch), a zero allocation is stored as
// zero both times, and both snapshots read back as the memory they hold.
func TestUnchangedChunksAreReferencedNotWrittenAgain(t *testing.T) {
	r, dev, dir := newTest(t, nil)
	const mib = 1 << 20
	big := make([]byte, 3*mib)
	for i := range big {
		big[i] = byte(i / mib * 7) // chunks 0, 7, 14: distinct, chunk 0 zero
	}
	big[0] = 1 // chunk 0 is not zero
	dev.mem[addrA] = big
	addrC := uint64(addrB + 1<<24)
	dev.mem[addrC] = make([]byte, mib)
	r.Free(addrA)
	r.Alloc(addrA, 3*mib)
	r.Alloc(addrC, mib)
	before := bytes.Clone(big)
	if tok := recordOne(t, r, dev, launch(r.Image([]byte("\x7fELF")), 5)); tok == 0 {
		t.Fatal("not recorded")
	}
	st := r.Status()
	// Prologue: A's 3 chunks and B's stored, C's zero. Epilogue: A's first
	// chunk stored (the launch wrote it), A's other two and B referenced,
	// C zero.
	if st.ChunksCopied != 5 || st.ChunksReferenced != 3 || st.ChunksZero != 2 {
		t.Errorf("chunks stored %d, referenced %d, zero %d; want 5, 3, 2", st.ChunksCopied, st.ChunksReferenced, st.ChunksZero)
	}
	pro, epi := firstInstance(t, dir)
	blob := func(s *db.Snapshot, addr uint64) []byte {
		for _, b := range s.Blobs {
			if b.Addr == addr {
				return b.Data
			}
		}
		t.Fatalf("no blob at 0x%x", addr)
		return nil
	}
	if !bytes.Equal(blob(pro, addrA), before) || !bytes.Equal(blob(epi, addrA), dev.mem[addrA]) ||
		!bytes.Equal(blob(epi, addrB), dev.mem[addrB]) || !bytes.Equal(blob(epi, addrC), dev.mem[addrC]) {
		t.Error("the snapshots do not read back as the memory before and after the launch")
	}
	if bytes.Equal(before, dev.mem[addrA]) {
		t.Fatal("the launch changed nothing: the test proves nothing")
	}
}

// A file that was not written is never referenced: chunks become the
// store's only when their file's write is committed.
func TestChunksOfAnUnwrittenFileAreNotReferenced(t *testing.T) {
	var c contentStore
	data := bytes.Repeat([]byte{3}, 4096)
	snap := &db.Snapshot{Blobs: []db.Blob{{Addr: 0x1000, Size: 4096, Data: data}}}
	encode := func(name string) (*chunkCounts, func()) {
		s, counts, commit := c.chunked(snap, name, 4096)
		if _, err := db.WriteSnapshot(filepath.Join(t.TempDir(), name), s, db.SnapshotOptions{ChunkSize: 4096}); err != nil {
			t.Fatal(err)
		}
		return counts, commit
	}
	name := func(dh string) string { return db.PrologueFileName("0123456789abcdef", dh) }
	counts, _ := encode(name("1111111111111111")) // not committed
	if counts.stored != 1 || counts.referenced != 0 {
		t.Errorf("first: %+v", *counts)
	}
	counts, commit := encode(name("2222222222222222"))
	if counts.stored != 1 || counts.referenced != 0 {
		t.Errorf("second, the first not committed: %+v", *counts)
	}
	commit()
	counts, _ = encode(name("3333333333333333"))
	if counts.stored != 0 || counts.referenced != 1 {
		t.Errorf("third, after the second committed: %+v", *counts)
	}
}
