package cuda

/*
#include <stdlib.h>
#include "driver.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// KernelRecord is one kernel execution as CUPTI timed it on the GPU.
type KernelRecord struct {
	Name          string
	Start, End    uint64 // GPU timestamps, ns
	CorrelationID uint32
	// Grid and Block are the launch's dimensions (x, y, z); DynamicShared
	// its dynamic shared memory in bytes.
	Grid, Block   [3]uint32
	DynamicShared uint32
}

// Duration is the kernel's execution time in ns.
func (r KernelRecord) Duration() uint64 {
	if r.End < r.Start {
		return 0
	}
	return r.End - r.Start
}

// KernelTimer collects kernel-only execution times through CUPTI's activity
// API (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL). CUPTI's activity state is
// process-wide, so one timer can be open at a time.
type KernelTimer struct {
	closed bool
}

var (
	cuptiLoadOnce sync.Once
	cuptiLoadErr  error
	timerMu       sync.Mutex
	timerOpen     bool
)

// NewKernelTimer loads libcupti (once) and starts recording kernel activity.
// Without CUPTI the error matches ErrNoCUPTI; callers fall back to events.
func NewKernelTimer() (*KernelTimer, error) {
	if err := Init(); err != nil {
		return nil, err
	}
	cuptiLoadOnce.Do(func() {
		var buf [512]C.char
		if C.mn_cupti_load(&buf[0], C.size_t(len(buf))) == 0 {
			cuptiLoadErr = fmt.Errorf("%w: %s", ErrNoCUPTI, C.GoString(&buf[0]))
		}
	})
	if cuptiLoadErr != nil {
		return nil, cuptiLoadErr
	}
	timerMu.Lock()
	defer timerMu.Unlock()
	if timerOpen {
		return nil, errors.New("NewKernelTimer: a KernelTimer is already open in this process; close it first")
	}
	if r := C.mn_cupti_enable(); r != 0 {
		return nil, fmt.Errorf("cuptiActivityEnable(CONCURRENT_KERNEL): %s", C.GoString(C.mn_cupti_result_string(r)))
	}
	timerOpen = true
	return &KernelTimer{}, nil
}

// Flush delivers every completed kernel record since the last Flush, in the
// order CUPTI reported them. Synchronize first so the kernels have finished.
func (t *KernelTimer) Flush() ([]KernelRecord, error) {
	if t.closed {
		return nil, errors.New("KernelTimer.Flush: the timer is closed")
	}
	if r := C.mn_cupti_flush(); r != 0 {
		return nil, fmt.Errorf("cuptiActivityFlushAll: %s", C.GoString(C.mn_cupti_result_string(r)))
	}
	var recs *C.mn_kernel_record
	var dropped C.uint64_t
	n := C.mn_cupti_take(&recs, &dropped)
	defer C.mn_cupti_free_records(recs, n)
	out := make([]KernelRecord, 0, int(n))
	for _, r := range unsafe.Slice(recs, int(n)) {
		if r.start == 0 && r.end == 0 {
			continue // CUPTI could not time this one
		}
		k := KernelRecord{Start: uint64(r.start), End: uint64(r.end), CorrelationID: uint32(r.correlation_id), DynamicShared: uint32(r.dynamic_shared)}
		for i := range 3 {
			k.Grid[i], k.Block[i] = uint32(r.grid[i]), uint32(r.block[i])
		}
		if r.name != nil {
			k.Name = C.GoString(r.name)
		}
		out = append(out, k)
	}
	if dropped != 0 {
		return out, fmt.Errorf("CUPTI: %d kernel records dropped (out of host memory)", uint64(dropped))
	}
	return out, nil
}

// Close stops recording and discards undelivered records.
func (t *KernelTimer) Close() error {
	if t.closed {
		return nil
	}
	t.closed = true
	timerMu.Lock()
	defer timerMu.Unlock()
	timerOpen = false
	if r := C.mn_cupti_disable(); r != 0 {
		return fmt.Errorf("cuptiActivityDisable: %s", C.GoString(C.mn_cupti_result_string(r)))
	}
	return nil
}
