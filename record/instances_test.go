package record

import (
	"testing"

	"github.com/mneme-gpu/mneme"
)

func TestLaunchShapeOrder(t *testing.T) {
	d := func(x uint32) mneme.Dim3 { return mneme.Dim3{X: x, Y: 1, Z: 1} }
	base := launchShape{d(4), d(64), 0}
	for _, c := range []struct {
		name          string
		s             launchShape
		less, greater bool // base.smaller(s), s.smaller(base)
	}{
		{"more blocks", launchShape{d(5), d(64), 0}, true, false},
		{"fewer blocks", launchShape{d(3), d(64), 0}, false, true},
		{"larger blocks", launchShape{d(4), d(128), 0}, true, false},
		{"smaller blocks", launchShape{d(4), d(32), 0}, false, true},
		{"same threads, other split", launchShape{d(8), d(32), 0}, false, false},
		{"same threads, more shared memory", launchShape{d(4), d(64), 1}, true, false},
		{"same", base, false, false},
	} {
		if got := base.smaller(c.s); got != c.less {
			t.Errorf("%s: base smaller = %v, want %v", c.name, got, c.less)
		}
		if got := c.s.smaller(base); got != c.greater {
			t.Errorf("%s: base larger = %v, want %v", c.name, got, c.greater)
		}
	}
}

// TestMakeRoomSkipsInstancesBeingWritten: an instance whose snapshots are
// still being written never gives way; another of its shape, or none, does.
func TestMakeRoomSkipsInstancesBeingWritten(t *testing.T) {
	f, launch := shapeFixture(t, 2)
	launch(1, 1)
	launch(2, 1)
	ks := f.rec.kernelState(saxpyLaunch(0, 0, 0, 0).Kernel)
	first, second := ks.meta.Instances[ks.order[0]], ks.meta.Instances[ks.order[1]]
	grid2 := launchShape{mneme.Dim3{X: 2, Y: 1, Z: 1}, mneme.Dim3{X: 4, Y: 1, Z: 1}, 0}
	f.rec.pending[second.Epilogue] = &pendingInstance{}
	if got := f.rec.makeRoom(ks, grid2); got != first {
		t.Errorf("with the latest being written, %v gives way, want the first", got)
	}
	ks.meta.Instances[first.DynamicHash] = first
	f.rec.pending[first.Prologue] = &pendingInstance{}
	if got := f.rec.makeRoom(ks, grid2); got != nil {
		t.Errorf("with both being written, %v gives way, want none", got)
	}
	delete(f.rec.pending, first.Prologue)
	delete(f.rec.pending, second.Epilogue)
	// The larger-shape rule skips them too.
	g, launch := shapeFixture(t, 1)
	launch(1, 1)
	ks = g.rec.kernelState(saxpyLaunch(0, 0, 0, 0).Kernel)
	only := ks.meta.Instances[ks.order[0]]
	g.rec.pending[only.Prologue] = &pendingInstance{}
	if got := g.rec.makeRoom(ks, grid2); got != nil {
		t.Errorf("the only instance, being written, gave way: %v", got)
	}
	delete(g.rec.pending, only.Prologue)
	if got := g.rec.makeRoom(ks, grid2); got != only {
		t.Errorf("once written it gives way to a larger shape: got %v", got)
	}
}
