package replay

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Reserving the recorded ranges. Device and host share one address space
// (unified addressing), and a replay process maps much before it can
// reserve device addresses: the CUDA driver's library and its start-up
// reservations, the context's own allocations. The reservation replay
// asks for first (from the recorded base, at least minReservation) reaches
// well past the recorded allocations and may meet any of them; the span of
// the allocations alone, on the 64 MiB boundaries the driver honours, is
// tried next. What occupies a range that cannot be reserved is named from
// /proc/self/maps.
//
// (Holding the range with an inaccessible host mapping from before the
// driver starts, given back just before the reservation, made every
// reservation fail on an H100 with driver 580: the driver does not place
// fixed-address reservations where a mapping was when it started.)

// spanAlign is the alignment of the recorded span: the driver honours
// fixed-address reservations at 64 MiB boundaries (record/inject.AddressAlign).
const spanAlign = 64 << 20

// recordedSpan is the span of the recorded allocations, widened to
// spanAlign. Zero when there are none.
func recordedSpan(blobs []blobSlot) span {
	lo, hi := ^uint64(0), uint64(0)
	for _, b := range blobs {
		if b.Size == 0 {
			continue
		}
		lo, hi = min(lo, b.Addr), max(hi, b.Addr+b.Size)
	}
	if hi == 0 || hi < lo || hi > ^uint64(0)-spanAlign {
		return span{}
	}
	lo = alignDown(lo, spanAlign)
	return span{lo, alignUp(hi, spanAlign) - lo}
}

// hostMapping is one line of /proc/self/maps: a range and what is mapped
// there (a file, [stack], or nothing for anonymous memory).
type hostMapping struct {
	span
	Name string
}

// parseMaps reads the format of /proc/PID/maps: "lo-hi perms offset dev
// inode [name]", addresses in hex. Lines that do not parse are skipped (the
// file is the kernel's, read for a diagnosis only).
func parseMaps(r io.Reader) []hostMapping {
	var out []hostMapping
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			continue
		}
		a, b, ok := strings.Cut(f[0], "-")
		if !ok {
			continue
		}
		lo, err1 := strconv.ParseUint(a, 16, 64)
		hi, err2 := strconv.ParseUint(b, 16, 64)
		if err1 != nil || err2 != nil || hi <= lo {
			continue
		}
		m := hostMapping{span: span{lo, hi - lo}}
		if len(f) > 5 {
			m.Name = strings.Join(f[5:], " ")
		}
		out = append(out, m)
	}
	return out
}

// occupants describes the host mappings that overlap s, at most a few.
func occupants(maps []hostMapping, s span) string {
	var parts []string
	n := 0
	for _, m := range maps {
		if m.Addr >= s.end() || s.Addr >= m.end() {
			continue
		}
		n++
		if len(parts) < 3 {
			name := m.Name
			if name == "" {
				name = "anonymous memory"
			}
			parts = append(parts, fmt.Sprintf("0x%x..0x%x (%s)", m.Addr, m.end(), name))
		}
	}
	if n == 0 {
		return ""
	}
	if n > len(parts) {
		parts = append(parts, fmt.Sprintf("and %d more", n-len(parts)))
	}
	return strings.Join(parts, ", ")
}

// occupantsNow describes what this process has mapped over s, "" if nothing
// (or /proc is not there).
func occupantsNow(s span) string {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return ""
	}
	defer f.Close()
	return occupants(parseMaps(f), s)
}
