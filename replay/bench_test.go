package replay

import (
	"testing"
)

// BenchmarkGPUReplayVecAdd replays the vector-add instance (1 Mi floats) in
// one open session with a warm compile cache: each op is one Run (reset,
// launch, synchronize, verify, and one timed launch). Target: >= 500 replays/s.
func BenchmarkGPUReplayVecAdd(b *testing.B) {
	for _, iters := range []int{1, 5} {
		b.Run(map[int]string{1: "iterations=1", 5: "iterations=5"}[iters], func(b *testing.B) {
			dir := recordOnGPU(b, vecaddLaunch(1<<20))
			s, err := Open(Options{DB: dir, Iterations: iters, Warmup: 0})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			cfg := s.Baseline()
			if res, err := s.Run(cfg); err != nil || !res.Verified {
				b.Fatalf("warm-up replay: %v %+v", err, res)
			}
			var reset, launch, sync, verify, exec float64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				res, err := s.Run(cfg)
				if err != nil || !res.Verified || res.CacheHit == "" {
					b.Fatalf("replay %d: %v %+v", i, err, res)
				}
				reset += res.ResetTime * float64(iters)
				launch += res.LaunchTime * float64(iters)
				sync += res.SyncTime * float64(iters)
				verify += res.VerifyTime
				exec += res.ExecTime[0]
			}
			b.StopTimer()
			n := float64(b.N)
			b.ReportMetric(n/b.Elapsed().Seconds(), "replays/s")
			b.ReportMetric(reset/n*1e6, "reset-us/replay")
			b.ReportMetric(launch/n*1e6, "launch-us/replay")
			b.ReportMetric(sync/n*1e6, "sync-us/replay")
			b.ReportMetric(verify/n*1e6, "verify-us/replay")
			b.ReportMetric(exec/n/1e3, "kernel-us")
		})
	}
}
