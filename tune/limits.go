package tune

import (
	"fmt"
	"runtime"

	"github.com/mneme-gpu/mneme"
)

// maxWorkersPerCore bounds worker processes by the machine: each holds a
// process, a compiler and, for run workers, a CUDA context, and more than a
// few per core only contend.
const maxWorkersPerCore = 4

// CheckWorkers refuses worker counts the machine cannot host: run workers
// (workers per GPU times the GPUs) and compile workers, each at most
// maxWorkersPerCore per CPU core. A negative compileWorkers means the
// default, which is within the bound.
func CheckWorkers(workers, gpus, compileWorkers int) error {
	limit := maxWorkersPerCore * runtime.NumCPU()
	if workers < 1 {
		return mneme.BadInput(fmt.Errorf("--workers %d: must be at least 1", workers))
	}
	if total := workers * max(gpus, 1); workers > limit || total > limit {
		return mneme.BadInput(fmt.Errorf("--workers %d: %d worker processes on %d GPU(s) exceed the limit of %d on this machine (%d per CPU core, %d cores)",
			workers, total, max(gpus, 1), limit, maxWorkersPerCore, runtime.NumCPU()))
	}
	if compileWorkers > limit {
		return mneme.BadInput(fmt.Errorf("--compile-workers %d: exceeds the limit of %d on this machine (%d per CPU core, %d cores)",
			compileWorkers, limit, maxWorkersPerCore, runtime.NumCPU()))
	}
	return nil
}
