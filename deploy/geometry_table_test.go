package deploy

import (
	"testing"

	"github.com/mneme-gpu/mneme"
)

// setDim returns d with dimension i (0 x, 1 y, 2 z) set to v.
func setDim(d mneme.Dim3, i int, v uint32) mneme.Dim3 {
	switch i {
	case 0:
		d.X = v
	case 1:
		d.Y = v
	default:
		d.Z = v
	}
	return d
}

// A launch with a zero dimension anywhere (grid, launch block or tuned
// block; x, y or z, each alone) keeps its geometry: CUDA refuses it either
// way, and a derived grid must not hide that. A derived grid dimension past
// CUDA's limit in any of x, y, z keeps it too.
func TestGeometryKeepsTheLaunchForEachDimensionAlone(t *testing.T) {
	rec := dim(8, 4, 2)
	tuned := dim(16, 2, 4)
	grid := dim(10, 6, 3)
	p := &Plan{TunedBlock: tuned, RecordedBlock: rec}
	if g, b := p.Geometry(grid, rec); b != tuned || g != dim(5, 12, 2) {
		t.Fatalf("the valid launch: grid %s block %s, want 5,12,2 and the tuned block", g, b)
	}
	for i, name := range []string{"x", "y", "z"} {
		for _, which := range []string{"grid", "block", "tuned"} {
			g, bl, tb := grid, rec, tuned
			switch which {
			case "grid":
				g = setDim(g, i, 0)
			case "block":
				bl = setDim(bl, i, 0)
			case "tuned":
				tb = setDim(tb, i, 0)
			}
			q := &Plan{TunedBlock: tb, RecordedBlock: rec}
			if which == "block" {
				q.RecordedBlock = mneme.Dim3{} // so only the zero dimension can keep it
			}
			if gotG, gotB := q.Geometry(g, bl); gotG != g || gotB != bl {
				t.Errorf("%s %s zero: grid %s block %s, want the launch's %s %s", which, name, gotG, gotB, g, bl)
			}
		}
		// The derived dimension alone past its limit: the tuned block is
		// smaller in that dimension only.
		limits := []uint64{maxGridX, maxGridYZ, maxGridYZ}
		small := setDim(rec, i, 1)
		big := setDim(grid, i, uint32(limits[i]))
		q := &Plan{TunedBlock: small, RecordedBlock: rec}
		if gotG, gotB := q.Geometry(big, rec); gotG != big || gotB != rec {
			t.Errorf("%s past its limit: grid %s block %s, want the launch's %s %s", name, gotG, gotB, big, rec)
		}
		// Just within the limit in that dimension, the tuned block applies.
		fits := setDim(grid, i, uint32(limits[i]/uint64([]uint32{rec.X, rec.Y, rec.Z}[i])))
		if gotG, gotB := q.Geometry(fits, rec); gotB != small || gotG == fits {
			t.Errorf("%s within its limit: grid %s block %s, want the tuned block %s", name, gotG, gotB, small)
		}
	}
}
