package inject

import (
	"math"
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/record/fingerprint"
)

// Every kernel that ran is in the statistics, by its time share: the
// recorded one with its static hash, a library's without; each shape with
// its launches, every launch timed.
func TestActivityStatistics(t *testing.T) {
	r, dev, dir := newTest(t, nil)
	recordOne(t, r, dev, launch(r.Image([]byte("cubin")), 1))
	r.WriteLaunchStats(false)
	if errs := r.Status().Errors; len(errs) != 0 {
		t.Fatal(errs)
	}
	if _, err := db.ReadLaunchStats(dir); err == nil {
		t.Error("statistics were written before any kernel ran")
	}
	g1, g2 := mneme.Dim3{X: 4, Y: 1, Z: 1}, mneme.Dim3{X: 8, Y: 1, Z: 1}
	b := mneme.Dim3{X: 256, Y: 1, Z: 1}
	const gemm = "sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8"
	r.KernelsRan([]KernelActivity{
		{Name: "_Z4vaddPfi", Grid: g1, Block: b, Ns: 1000},
		{Name: gemm, Grid: g1, Block: b, Shared: 4096, Ns: 5000},
		{Name: gemm, Grid: g2, Block: b, Shared: 4096, Ns: 7000},
		{Name: "", Grid: g1, Block: b, Ns: 99},
	})
	r.KernelsRan([]KernelActivity{{Name: "_Z4vaddPfi", Grid: g1, Block: b, Ns: 3000}})
	r.WriteLaunchStats(true)
	if errs := r.Status().Errors; len(errs) != 0 {
		t.Fatal(errs)
	}
	s, err := db.ReadLaunchStats(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Complete || s.Launches != 4 || s.GPUTimeNs != 16000 || len(s.Kernels) != 2 {
		t.Fatalf("statistics %+v: want 4 launches (the nameless record left out), 16000 ns, 2 kernels, complete", s)
	}
	k := d(t, dir).Kernels[0]
	for _, ks := range s.Kernels {
		switch ks.KernelName {
		case gemm:
			if ks.StaticHash != "" || ks.Launches != 2 || len(ks.Shapes) != 2 || math.Abs(ks.TimeShare-0.75) > 1e-9 {
				t.Errorf("library kernel %+v: want no hash, 2 launches in 2 shapes, 75%%", ks)
			}
			for _, sh := range ks.Shapes {
				if sh.SharedMem != 4096 || sh.TimedLaunches != 1 || sh.FirstLaunchNs != sh.TimedNs {
					t.Errorf("library shape %+v: want its one launch timed, and shown as its first", sh)
				}
			}
		case "_Z4vaddPfi":
			if ks.StaticHash != k.StaticHash || ks.Launches != 2 || ks.TimedLaunches != 2 || len(ks.Shapes) != 1 || ks.Shapes[0].FirstLaunchNs != 1000 || math.Abs(ks.TimeShare-0.25) > 1e-9 {
				t.Errorf("recorded kernel %+v: want hash %s, 2 timed launches in 1 shape, 25%%", ks, k.StaticHash)
			}
		default:
			t.Errorf("unexpected kernel %q", ks.KernelName)
		}
	}
}

// Shapes beyond the bound are counted as other launches.
func TestActivityShapesBounded(t *testing.T) {
	r, _, dir := newTest(t, nil)
	var acts []KernelActivity
	for i := range ActivityStatsLimits.MaxShapes + 3 {
		acts = append(acts, KernelActivity{Name: "k", Grid: mneme.Dim3{X: uint32(i + 1), Y: 1, Z: 1}, Block: mneme.Dim3{X: 32, Y: 1, Z: 1}, Ns: 10})
	}
	r.KernelsRan(acts)
	r.WriteLaunchStats(true)
	if errs := r.Status().Errors; len(errs) != 0 {
		t.Fatal(errs)
	}
	s, err := db.ReadLaunchStats(dir)
	if err != nil {
		t.Fatal(err)
	}
	ks := s.Kernels[0]
	if len(ks.Shapes) != ActivityStatsLimits.MaxShapes || ks.OtherShapeLaunches != 3 || ks.Launches != uint64(len(acts)) {
		t.Errorf("%d shapes, %d other launches, %d launches", len(ks.Shapes), ks.OtherShapeLaunches, ks.Launches)
	}
}

func d(t *testing.T, dir string) *db.DB {
	t.Helper()
	x, err := db.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// The recorder's own fingerprint kernel runs in the application's context,
// and the activity records time it too: it is not the application's.
func TestRecordersOwnKernelIsNotCounted(t *testing.T) {
	r, _, dir := newTest(t, nil)
	b := mneme.Dim3{X: 256, Y: 1, Z: 1}
	r.KernelsRan([]KernelActivity{
		{Name: fingerprint.Kernel, Grid: mneme.Dim3{X: 64, Y: 1, Z: 1}, Block: b, Ns: 9000},
		{Name: "_Z4vaddPfi", Grid: mneme.Dim3{X: 4, Y: 1, Z: 1}, Block: b, Ns: 1000},
	})
	r.WriteLaunchStats(true)
	s, err := db.ReadLaunchStats(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Kernels) != 1 || s.Kernels[0].KernelName != "_Z4vaddPfi" || s.GPUTimeNs != 1000 {
		t.Errorf("statistics %d kernels, %d ns: want vadd's alone", len(s.Kernels), s.GPUTimeNs)
	}
}
