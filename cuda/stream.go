package cuda

/*
#include "driver.h"
*/
import "C"

import (
	"fmt"
	"time"
)

// Stream is a CUDA stream; 0 is the legacy default stream.
type Stream uintptr

// NewStream creates a stream in the current context.
func NewStream() (Stream, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	var s C.uintptr_t
	if err := check("cuStreamCreate", C.mn_cuStreamCreate(&s)); err != nil {
		return 0, err
	}
	return Stream(s), nil
}

// NewStreamNonBlocking creates a stream that does not synchronize with the
// legacy default stream: work on it runs beside an application's kernels
// instead of waiting for them (and making them wait).
func NewStreamNonBlocking() (Stream, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	var s C.uintptr_t
	if err := check("cuStreamCreate", C.mn_cuStreamCreateNonBlocking(&s)); err != nil {
		return 0, err
	}
	return Stream(s), nil
}

// Synchronize waits for the stream's work; a kernel fault shows here.
func (s Stream) Synchronize() error {
	if err := Init(); err != nil {
		return err
	}
	return check("cuStreamSynchronize", C.mn_cuStreamSynchronize(C.uintptr_t(s)))
}

// Destroy destroys the stream (not the default stream, which is not ours).
func (s Stream) Destroy() error {
	if err := Init(); err != nil {
		return err
	}
	if s == 0 {
		return nil
	}
	return check("cuStreamDestroy_v2", C.mn_cuStreamDestroy(C.uintptr_t(s)))
}

// Event is a CUDA event with timing enabled.
type Event struct {
	h uintptr
}

// NewEvent creates a timing event in the current context.
func NewEvent() (*Event, error) { return newEvent(0) }

// NewMarkerEvent creates an event without timing in the current context:
// cheaper to record, for waiting on work only.
func NewMarkerEvent() (*Event, error) { return newEvent(eventDisableTiming) }

// eventDisableTiming is CU_EVENT_DISABLE_TIMING.
const eventDisableTiming = 0x2

func newEvent(flags uint) (*Event, error) {
	if err := Init(); err != nil {
		return nil, err
	}
	var h C.uintptr_t
	if err := check("cuEventCreate", C.mn_cuEventCreate(&h, C.unsigned(flags))); err != nil {
		return nil, err
	}
	return &Event{h: uintptr(h)}, nil
}

// Handle is the driver's CUevent, for C code that records or waits on the
// event without a call into Go.
func (e *Event) Handle() uintptr { return e.h }

// EventEntryPoints are driver entry points that C code outside this package
// calls on events and streams without a call into Go (the application's
// shim, which throttles its launches with them).
type EventEntryPoints struct {
	EventRecord, EventSynchronize, StreamIsCapturing, ExchangeCaptureMode uintptr
}

// EventEntries returns the addresses of cuEventRecord, cuEventSynchronize,
// cuStreamIsCapturing and cuThreadExchangeStreamCaptureMode.
func EventEntries() (EventEntryPoints, error) {
	if err := Init(); err != nil {
		return EventEntryPoints{}, err
	}
	var out [4]C.uintptr_t
	if C.mn_event_entries(&out[0]) == 0 {
		return EventEntryPoints{}, fmt.Errorf("the CUDA driver lacks one of cuEventRecord, cuEventSynchronize, cuStreamIsCapturing, cuThreadExchangeStreamCaptureMode")
	}
	return EventEntryPoints{uintptr(out[0]), uintptr(out[1]), uintptr(out[2]), uintptr(out[3])}, nil
}

// Record enqueues the event on stream s.
func (e *Event) Record(s Stream) error {
	if err := Init(); err != nil {
		return err
	}
	return check("cuEventRecord", C.mn_cuEventRecord(C.uintptr_t(e.h), C.uintptr_t(s)))
}

// Synchronize waits until the event has completed.
func (e *Event) Synchronize() error {
	if err := Init(); err != nil {
		return err
	}
	return check("cuEventSynchronize", C.mn_cuEventSynchronize(C.uintptr_t(e.h)))
}

// Elapsed is the GPU time between two completed events (about 0.5 µs resolution).
func Elapsed(start, end *Event) (time.Duration, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	var ms C.float
	if err := check("cuEventElapsedTime_v2", C.mn_cuEventElapsedTime(&ms, C.uintptr_t(start.h), C.uintptr_t(end.h))); err != nil {
		return 0, err
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// Destroy destroys the event.
func (e *Event) Destroy() error {
	if err := Init(); err != nil {
		return err
	}
	if e.h == 0 {
		return nil
	}
	err := check("cuEventDestroy_v2", C.mn_cuEventDestroy(C.uintptr_t(e.h)))
	e.h = 0
	return err
}
