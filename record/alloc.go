package record

import (
	"errors"
	"fmt"
	"time"

	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/record/arena"
)

// Malloc serves a device allocation from the arena, reserving it first if
// needed. An error means the application's call must fail with
// cudaErrorMemoryAllocation; it has already been reported.
func (r *Recorder) Malloc(size uint64) (uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status.Allocations++
	if r.arena == nil && r.arenaErr == nil {
		Trace("runtime", "arena reserve")
		start := time.Now()
		r.arena, r.arenaErr = r.reserveArena()
		r.status.ArenaSeconds += time.Since(start).Seconds()
		if r.arenaErr != nil {
			r.status.ArenaError = r.arenaErr.Error()
			r.reportError(r.arenaErr.Error())
		}
	}
	if r.arenaErr != nil {
		return 0, r.arenaErr
	}
	start := time.Now()
	addr, err := r.arena.Alloc(size)
	if err != nil && r.writer != nil && len(r.pending) > 0 {
		// Shadow copies of snapshots being written hold device memory the
		// application may need: let them drain, then try again.
		r.writer.wait()
		r.collect()
		addr, err = r.arena.Alloc(size)
	}
	r.status.ArenaSeconds += time.Since(start).Seconds()
	if err == nil && !r.fingerprintsPrepared && !r.cfg.FullCopies && r.liveBytes() >= r.stagedMin {
		// Snapshots will be taken from fingerprints from now on.
		r.fingerprintsPrepared = true
		if p, ok := r.proc.(FingerprintPreparer); ok {
			p.PrepareFingerprints()
		}
	}
	if err != nil {
		var ex *arena.ExhaustedError
		if errors.As(err, &ex) && r.status.ArenaError == "" {
			r.status.ArenaError = err.Error()
		}
		// Once, clearly: an application that retries or probes for the
		// largest allocation would otherwise bury the message.
		if !r.oomSeen {
			r.oomSeen = true
			r.reportError(fmt.Sprintf("allocation %d of %d bytes failed; the application gets cudaErrorMemoryAllocation: %v", r.status.Allocations, size, err))
		}
		return 0, err
	}
	return addr, nil
}

// reservation is the size of the range the arena reserves and a replay must
// reserve: -vass (by default the GPU's memory), at least MinReservation, in
// whole 2 MiB units.
func (r *Recorder) reservation() uint64 {
	if r.arena != nil {
		return r.arena.Reserved()
	}
	const unit = 2 << 20
	return max((r.arenaSize()+unit-1)/unit*unit, MinReservation)
}

// reserveArena reserves the arena at the configured base or, when the
// driver already holds part of that range and the base was not chosen
// (MNEME_VA_BASE), at the next bases a TiB apart: a whole-GPU reservation
// at the default base once met a driver mapping 2.5 GiB into it (H100,
// about one recording in a hundred). The recording names the base it got,
// and replays reserve that one.
func (r *Recorder) reserveArena() (*arena.Arena, error) {
	a, err := arena.NewReserving(r.vm, r.cfg.VABase, r.arenaSize(), r.reservation())
	for k := uint64(1); err != nil && !r.cfg.VABaseChosen && k <= arenaBaseRetries; k++ {
		base := r.cfg.VABase + k*arenaBaseStride
		if b, e := arena.NewReserving(r.vm, base, r.arenaSize(), r.reservation()); e == nil {
			Trace("runtime", "arena at %#x: %v", base, err)
			a, err = b, nil
			r.cfg.VABase = base
			r.status.ArenaBase = db.FormatVAddr(base)
		}
	}
	return a, err
}

// arenaSize is -vass, or the GPU's memory when -vass is auto.
func (r *Recorder) arenaSize() uint64 {
	if r.cfg.VASize != 0 {
		return r.cfg.VASize
	}
	if r.deviceMem == 0 {
		r.deviceMem = arena.DefaultSize
		if dev, err := r.proc.Device(); err == nil && dev.TotalMem > 0 {
			r.deviceMem = dev.TotalMem
		} else {
			r.reportError(fmt.Sprintf("-vass auto: the GPU's memory size is unknown (%v); the arena holds %s", err, "4 GiB"))
		}
	}
	return r.deviceMem
}

// Free returns an arena block. ours is false for addresses the arena did
// not hand out, which the caller passes on to CUDA. The device is
// synchronized first, as cudaFree does, because the block may be handed out
// again at once while a kernel still uses it.
func (r *Recorder) Free(addr uint64) (ours bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.arena == nil || !r.arena.Owns(addr) {
		return false, nil
	}
	if err := r.proc.Synchronize(); err != nil {
		return true, err
	}
	return true, r.arena.Free(addr)
}

// Managed counts a managed allocation of size bytes at addr (the shim
// warns about it) and lists it in the database (db.ManagedFileName), so
// replay can refuse the launches whose arguments point into it.
func (r *Recorder) Managed(addr, size uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status.ManagedAllocations++
	r.managed.Add(addr, size)
	r.managedDirty = true
}

// MinReservation is the smallest virtual range the arena reserves: the
// driver honours the fixed base address for a reservation of this size
// (measured on an H200) but not for every smaller one.
const MinReservation = arena.DefaultSize

// Fallback arena bases: arenaBaseRetries more, arenaBaseStride apart.
const (
	arenaBaseRetries = 4
	arenaBaseStride  = 1 << 40
)
