package inject

import (
	"github.com/zeebo/xxh3"

	"github.com/mneme-gpu/mneme/db"
)

// contentStore is the driver-level recording's content store: every chunk
// a snapshot file of this recording stores with its data, by a hash of its
// bytes, so a later snapshot references it instead of writing it again. The
// driver path copies every live allocation to the host whole (it has no GPU
// fingerprints), so the chunks are hashed there: what it saves is the
// encoding and writing of chunks a snapshot already holds, such as the ones
// a launch left unchanged between its prologue and its epilogue.
type contentStore struct {
	refs map[xxh3.Uint128]db.ChunkRef
}

// chunkCounts says how a snapshot's blob chunks were stored.
type chunkCounts struct {
	stored, zero, referenced int64
}

// chunked is s with its blobs given chunk by chunk (db.Blob.Chunks): an
// all-zero chunk stored as such, a chunk the store holds as a reference, any
// other with its data; written to file, whose chunks of data become the
// store's once commit is called after the file is written (a file not
// written is never referenced).
func (c *contentStore) chunked(s *db.Snapshot, file string, cs int) (out *db.Snapshot, counts *chunkCounts, commit func()) {
	if c.refs == nil {
		c.refs = map[xxh3.Uint128]db.ChunkRef{}
	}
	counts = &chunkCounts{}
	pending := map[xxh3.Uint128]db.ChunkRef{}
	globalSizes := make([]uint64, len(s.Globals))
	for i, g := range s.Globals {
		globalSizes[i] = g.Size
	}
	blobSizes := make([]uint64, len(s.Blobs))
	for i, b := range s.Blobs {
		blobSizes[i] = b.Size
	}
	out = &db.Snapshot{Globals: s.Globals, Args: s.Args, Blobs: make([]db.Blob, len(s.Blobs))}
	for b, blob := range s.Blobs {
		data := blob.Data
		out.Blobs[b] = db.Blob{Addr: blob.Addr, Size: blob.Size, Chunks: func(i int) (db.SourceChunk, error) {
			lo := i * cs
			chunk := data[lo:min(lo+cs, len(data))]
			if db.IsZero(chunk) {
				counts.zero++
				return db.SourceChunk{Zero: true}, nil
			}
			h := xxh3.Hash128(chunk)
			if ref, ok := c.refs[h]; ok {
				counts.referenced++
				return db.SourceChunk{Ref: &ref}, nil
			}
			if _, ok := pending[h]; !ok {
				pending[h] = db.ChunkRef{File: file, Chunk: db.ChunkIndex(globalSizes, blobSizes, b, i, cs)}
			}
			counts.stored++
			return db.SourceChunk{Data: chunk}, nil
		}}
	}
	return out, counts, func() {
		for h, ref := range pending {
			c.refs[h] = ref
		}
	}
}
