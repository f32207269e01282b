package replay

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/mneme-gpu/mneme/db"
)

// randomSnapshots makes a prologue of several blobs and an epilogue in which
// a kernel wrote some scattered runs of bytes.
func randomSnapshots(rng *rand.Rand) (pro, epi *db.Snapshot) {
	pro, epi = &db.Snapshot{}, &db.Snapshot{}
	addr := uint64(0x7f0000000000)
	for b := 0; b < 1+rng.IntN(4); b++ {
		size := uint64(1 + rng.IntN(600_000))
		p := make([]byte, size)
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
		e := append([]byte(nil), p...)
		for w := 0; w < rng.IntN(6); w++ {
			at := rng.Uint64N(size)
			n := min(size-at, 1+rng.Uint64N(200_000))
			for i := at; i < at+n; i++ {
				e[i] = ^e[i]
			}
		}
		pro.Blobs = append(pro.Blobs, db.Blob{Addr: addr, Size: size, Data: p})
		epi.Blobs = append(epi.Blobs, db.Blob{Addr: addr, Size: size, Data: e})
		addr = alignUp(addr+size+uint64(rng.IntN(3))*(2<<20), 256)
	}
	pro.Globals = []db.Global{{Name: "g", Addr: 0x1000, Size: 4, Data: []byte{1, 2, 3, 4}}}
	epi.Globals = []db.Global{{Name: "g", Addr: 0x1000, Size: 4, Data: []byte{9, 2, 3, 4}}}
	return pro, epi
}

// apply runs reset copies on a host model of the arena and the prologue image.
func apply(t *testing.T, lay layout, pro *db.Snapshot, mem map[uint64][]byte, copies []resetCopy) {
	t.Helper()
	image := make([]byte, lay.copyBytes)
	for i, b := range lay.blobs {
		copy(image[b.Off:], pro.Blobs[i].Data)
	}
	for _, c := range copies {
		done := false
		for _, b := range lay.blobs {
			if c.Dst >= b.Addr && c.Dst+c.Size <= b.Addr+b.Size {
				copy(mem[b.Addr][c.Dst-b.Addr:], image[c.SrcOff:c.SrcOff+c.Size])
				done = true
			}
		}
		if !done {
			t.Fatalf("reset copy 0x%x+%d leaves every allocation", c.Dst, c.Size)
		}
	}
}

func TestResetsRestoreThePrologueFromTheEpilogue(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for trial := 0; trial < 40; trial++ {
		pro, epi := randomSnapshots(rng)
		lay := planLayout(pro, epi)
		partial := planPartialReset(lay.blobs, db.ChangedRanges(pro, epi))
		full := planFullReset(lay.blobs)
		if len(partial) > len(lay.blobs)*maxResetCopies {
			t.Fatalf("%d partial copies for %d blobs", len(partial), len(lay.blobs))
		}
		for name, copies := range map[string][]resetCopy{"partial": partial, "full": full} {
			mem := map[uint64][]byte{}
			for _, b := range epi.Blobs {
				mem[b.Addr] = append([]byte(nil), b.Data...)
			}
			apply(t, lay, pro, mem, copies)
			for _, b := range pro.Blobs {
				if string(mem[b.Addr]) != string(b.Data) {
					t.Fatalf("trial %d: %s reset leaves allocation 0x%x different from the prologue", trial, name, b.Addr)
				}
			}
		}
		var partialBytes, fullBytes uint64
		for _, c := range partial {
			partialBytes += c.Size
		}
		for _, c := range full {
			fullBytes += c.Size
		}
		if partialBytes > fullBytes {
			t.Fatalf("partial reset copies %d bytes, more than the full %d", partialBytes, fullBytes)
		}
	}
}

func TestUnchangedSpansComplementTheResets(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for trial := 0; trial < 40; trial++ {
		pro, epi := randomSnapshots(rng)
		lay := planLayout(pro, epi)
		partial := planPartialReset(lay.blobs, db.ChangedRanges(pro, epi))
		for _, b := range lay.blobs {
			covered := make([]int, b.Size)
			for _, u := range unchangedSpans(b, partial) {
				for i := u.Addr; i < u.end(); i++ {
					covered[i-b.Addr]++
				}
			}
			for _, c := range partial {
				for i := max(c.Dst, b.Addr); i < min(c.Dst+c.Size, b.Addr+b.Size); i++ {
					covered[i-b.Addr]++
				}
			}
			for i, n := range covered {
				if n != 1 {
					t.Fatalf("trial %d: byte %d of allocation 0x%x covered %d times", trial, i, b.Addr, n)
				}
			}
		}
	}
}

func TestLayoutAlignsImagesAndMarksChangedGlobals(t *testing.T) {
	pro, epi := randomSnapshots(rand.New(rand.NewPCG(1, 1)))
	lay := planLayout(pro, epi)
	end := uint64(0)
	for _, b := range lay.blobs {
		if b.Off%copyAlign != 0 || b.Off < end {
			t.Fatalf("blob image at offset %d overlaps or is misaligned", b.Off)
		}
		end = b.Off + b.Size
	}
	g := lay.globals[0]
	if g.Off%copyAlign != 0 || g.Off < end || !g.Changed || g.Off+g.Size > lay.copyBytes {
		t.Fatalf("global slot %+v (blobs end at %d, image %d bytes)", g, end, lay.copyBytes)
	}
}

func TestPlanMappings(t *testing.T) {
	const base, gran = 0x7f0000000000, 2 << 20
	blobs := []blobSlot{
		{Addr: base + 100, Size: 10},
		{Addr: base + gran - 10, Size: 20}, // straddles into the second granule
		{Addr: base + 5*gran, Size: gran},
		{Addr: base + 9*gran, Size: 0}, // empty allocations need no memory
	}
	maps, err := planMappings(blobs, base, 16*gran, gran)
	if err != nil {
		t.Fatal(err)
	}
	want := []span{{base, 2 * gran}, {base + 5*gran, gran}}
	if len(maps) != len(want) {
		t.Fatalf("mappings %v, want %v", maps, want)
	}
	for i := range want {
		if maps[i] != want[i] {
			t.Fatalf("mappings %v, want %v", maps, want)
		}
	}
	_, err = planMappings([]blobSlot{{Addr: base + 16*gran, Size: 1}}, base, 16*gran, gran)
	var ie *InputError
	if !errors.As(err, &ie) {
		t.Fatalf("allocation outside the arena: got %v, want an input error", err)
	}
}

// Replay reserves the used part of the arena, not all of it.
func TestReservationSize(t *testing.T) {
	const base, gran = 0x153940000000, 2 << 20
	for _, c := range []struct {
		maps []span
		want uint64
	}{
		{[]span{{base, 12 << 20}}, minReservation},
		{[]span{{base, 2 << 20}, {base + 3<<30, 2 << 20}}, 3<<30 + 2<<20},
		{[]span{{base + 1<<30, 1 << 20}}, 1<<30 + 2<<20},
	} {
		if got := reservationSize(c.maps, base, gran); got != c.want {
			t.Errorf("reservationSize(%v) = %d, want %d", c.maps, got, c.want)
		}
	}
}
