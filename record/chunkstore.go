package record

import (
	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/record/fingerprint"
)

// chunkStore is the recording's content store: where every chunk stored
// with its data lives, for later snapshots to reference instead of copying
// it again, and the snapshot file names planned from fingerprints.
type chunkStore struct {
	refs map[fingerprint.Sum]db.ChunkRef
	// planned names every snapshot file planned from fingerprints, written
	// or not: a name other snapshots may reference is never reused.
	planned map[string]bool
}

func newChunkStore() chunkStore {
	return chunkStore{refs: map[fingerprint.Sum]db.ChunkRef{}, planned: map[string]bool{}}
}

// lookup is where a chunk of this content is stored, if one is.
func (c *chunkStore) lookup(sum fingerprint.Sum) (db.ChunkRef, bool) {
	ref, ok := c.refs[sum]
	return ref, ok
}

// add stores a chunk's place; the plan that adds it lists sum in its added.
func (c *chunkStore) add(sum fingerprint.Sum, ref db.ChunkRef) { c.refs[sum] = ref }

// plan takes a snapshot file name for good.
func (c *chunkStore) plan(name string) { c.planned[name] = true }

// isPlanned reports whether a file name was ever planned.
func (c *chunkStore) isPlanned(name string) bool { return c.planned[name] }

// forget takes a plan's chunks out of the store: its file will not exist.
// The name stays planned.
func (c *chunkStore) forget(p *snapshotPlan) {
	for _, sum := range p.added {
		if ref, ok := c.refs[sum]; ok && ref.File == p.name {
			delete(c.refs, sum)
		}
	}
}
