package replay

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme"
)

func TestRecordedSpanCoversTheAllocationsOn64MiBBoundaries(t *testing.T) {
	const m = 64 << 20
	base := uint64(0x7f0b40000000)
	for name, c := range map[string]struct {
		blobs []blobSlot
		want  span
	}{
		"none":              {nil, span{}},
		"empty blob":        {[]blobSlot{{Addr: base, Size: 0}}, span{}},
		"one, aligned":      {[]blobSlot{{Addr: base, Size: 4096}}, span{base, m}},
		"one, inside":       {[]blobSlot{{Addr: base + 0x2800000, Size: 4 << 20}}, span{base, m}},
		"across a boundary": {[]blobSlot{{Addr: base + m - 4096, Size: 8192}}, span{base, 2 * m}},
		"two, apart":        {[]blobSlot{{Addr: base + 3*m + 5, Size: 1}, {Addr: base + 0x100000, Size: 16}}, span{base, 4 * m}},
		"wraps":             {[]blobSlot{{Addr: ^uint64(0) - 4096, Size: 4096}}, span{}},
	} {
		if got := recordedSpan(c.blobs); got != c.want {
			t.Errorf("%s: 0x%x+0x%x, want 0x%x+0x%x", name, got.Addr, got.Size, c.want.Addr, c.want.Size)
		}
	}
}

func TestParseMapsAndOccupants(t *testing.T) {
	maps := parseMaps(strings.NewReader(`55d4c000-55d4d000 r-xp 00000000 08:01 123 /usr/bin/mneme
7f0b40000000-7f0b40200000 rw-p 00000000 00:00 0 
7f0b42000000-7f0b42100000 r-xp 00000000 08:01 77 /usr/lib/x86_64-linux-gnu/libcuda.so.590.48 (deleted)
bogus line
ffffffff-0 r-xp 0 0 0 x
7ffc0000-7ffd0000 rw-p 00000000 00:00 0 [stack]
`))
	if len(maps) != 4 {
		t.Fatalf("%d mappings, want 4: %+v", len(maps), maps)
	}
	if maps[2].Name != "/usr/lib/x86_64-linux-gnu/libcuda.so.590.48 (deleted)" || maps[3].Name != "[stack]" || maps[1].Name != "" {
		t.Errorf("names %q %q %q", maps[1].Name, maps[2].Name, maps[3].Name)
	}
	got := occupants(maps, span{0x7f0b40000000, 64 << 20})
	if !strings.Contains(got, "0x7f0b40000000..0x7f0b40200000 (anonymous memory)") || !strings.Contains(got, "libcuda.so") || strings.Contains(got, "mneme") {
		t.Errorf("occupants: %q", got)
	}
	// Adjacent is not overlapping, on either side.
	if got := occupants(maps, span{0x7f0b40200000, 0x7f0b42000000 - 0x7f0b40200000}); got != "" {
		t.Errorf("a range between two mappings: %q", got)
	}
	var many []hostMapping
	for i := range 5 {
		many = append(many, hostMapping{span: span{uint64(i) * 4096, 4096}})
	}
	if got := occupants(many, span{0, 5 * 4096}); !strings.HasSuffix(got, "and 2 more") {
		t.Errorf("five occupants: %q", got)
	}
}

// The recorded span is tried after the large reservation from the recorded
// base, and only when it differs from it and covers every mapping.
func TestReservations(t *testing.T) {
	const m, gran = 64 << 20, 2 << 20
	base := uint64(0x7f0b40000000)
	maps := []span{{base + gran, gran}}
	recorded := span{base, m}
	got := reservations(maps, base, gran, recorded)
	if len(got) != 2 || got[0] != (span{base, minReservation}) || got[1] != recorded {
		t.Errorf("recorded span: %+v", got)
	}
	if got := reservations(maps, base, gran, span{}); len(got) != 1 {
		t.Errorf("no recorded span: %+v", got)
	}
	if got := reservations(maps, base, gran, span{base, minReservation}); len(got) != 1 {
		t.Errorf("the recorded span is the large reservation: %+v", got)
	}
	if got := reservations([]span{{base + m, gran}}, base, gran, recorded); len(got) != 1 {
		t.Errorf("a mapping outside the held range: %+v", got)
	}
}

func FuzzParseMaps(f *testing.F) {
	f.Add("7f0b40000000-7f0b40200000 rw-p 00000000 00:00 0 \n7ffc0000-7ffd0000 rw-p 00000000 00:00 0 [stack]\n")
	f.Add("0-1 r 0 0 0 a b c")
	f.Fuzz(func(t *testing.T, text string) {
		for _, m := range parseMaps(strings.NewReader(text)) {
			if m.Size == 0 || m.end() < m.Addr {
				t.Fatalf("mapping 0x%x+0x%x", m.Addr, m.Size)
			}
		}
	})
}

// reserve's refusal is out of resources (exit 7) either way, and marked as
// held by this process only when its own mappings occupy the range, which
// `mneme replay` answers by starting again in a fresh process.
func TestRangeTakenErrorSaysWhoHoldsIt(t *testing.T) {
	for _, host := range []bool{false, true} {
		err := error(&rangeTakenError{msg: "out of resources: the range", host: host})
		if !errors.Is(err, mneme.ErrOutOfResources) {
			t.Errorf("host %v: not out of resources", host)
		}
		if errors.Is(err, ErrRangeHeldByThisProcess) != host {
			t.Errorf("host %v: held by this process = %v", host, !host)
		}
		if wrapped := fmt.Errorf("open: %w", err); errors.Is(wrapped, ErrRangeHeldByThisProcess) != host || !errors.Is(wrapped, mneme.ErrOutOfResources) {
			t.Errorf("host %v: wrapped, the marks are lost", host)
		}
	}
}
