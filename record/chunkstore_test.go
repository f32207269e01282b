package record

import (
	"testing"

	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/record/fingerprint"
)

// TestChunkStoreForgetsOnlyThePlansOwnChunks: a plan whose file is never
// written takes back the chunks it added, not a chunk of the same content
// that another file stores, and its name stays taken.
func TestChunkStoreForgetsOnlyThePlansOwnChunks(t *testing.T) {
	c := newChunkStore()
	a, b := fingerprint.Sum{A: 1}, fingerprint.Sum{A: 2}
	c.plan("first")
	c.add(a, db.ChunkRef{File: "first", Chunk: 0})
	c.plan("lost")
	c.add(b, db.ChunkRef{File: "lost", Chunk: 3})
	// The lost plan also listed a, which "first" stores.
	c.forget(&snapshotPlan{name: "lost", added: []fingerprint.Sum{a, b}})
	if ref, ok := c.lookup(a); !ok || ref.File != "first" {
		t.Errorf("chunk of first: %+v %v, want kept", ref, ok)
	}
	if _, ok := c.lookup(b); ok {
		t.Error("chunk of the lost plan still referenced")
	}
	if !c.isPlanned("lost") || !c.isPlanned("first") || c.isPlanned("other") {
		t.Errorf("planned names: lost %v first %v other %v", c.isPlanned("lost"), c.isPlanned("first"), c.isPlanned("other"))
	}
}
