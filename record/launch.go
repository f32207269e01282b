package record

import (
	"fmt"

	"github.com/mneme-gpu/mneme/db"
)

// Launch is shown every launch of the application. It records the launch
// when it is selected and new, performing it itself; otherwise it tells the
// caller to perform it.
func (r *Recorder) Launch(l *Launch) (Decision, error) {
	d, _, err := r.LaunchMemo(l)
	return d, err
}

// LaunchMemo is Launch, and says what the caller may remember so that it
// need not show this launch's repeats (see Memo).
func (r *Recorder) LaunchMemo(l *Launch) (Decision, Memo, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f, d, m := r.beginLaunch(l)
	if f == nil {
		return d, m, nil
	}
	d, err := r.recordInstance(f)
	return d, r.endLaunch(f), err
}

// beginLaunch decides what to do with a launch: f is the launch to record
// (its kernel described), nil when d and m say what the caller does
// instead. r.mu is held.
func (r *Recorder) beginLaunch(l *Launch) (f *inFlight, d Decision, m Memo) {
	r.collect()
	r.status.LaunchesSeen++
	ks := r.kernelState(l.Kernel)
	if !ks.selected || ks.broken {
		return nil, ForwardAlways, Memo{}
	}
	r.status.LaunchesSelected++
	r.matching++
	if r.matching <= r.cfg.Skip {
		return nil, Forward, Memo{}
	}
	dh := db.DynamicHash(l.Grid, l.Block, l.Shared, l.Args)
	var evicted *db.Instance
	if ks.meta != nil {
		if inst := ks.meta.Instances[dh]; inst != nil {
			inst.Occurrences++
			ks.dirty = true
			m := r.memo(ks, dh)
			m.ShapeCovered = r.capped(ks)
			return nil, Forward, m
		}
	}
	if r.inFlight != nil {
		// Recording through the driver, another thread's launch is being
		// recorded: this one runs as it is.
		return nil, Forward, Memo{}
	}
	if gc, ok := r.proc.(GraphCapture); ok && gc.Captured(l) {
		return nil, Forward, Memo{}
	}
	if ks.meta != nil && r.capped(ks) {
		// Full: a new shape may take the place of an instance that stands
		// for less (instances.go); nothing else is recorded.
		if evicted = r.makeRoom(ks, shapeOf(l)); evicted == nil {
			return nil, Forward, Memo{ShapeCovered: true, Capped: !r.canEvict(ks)}
		}
	}
	if ks.meta == nil {
		Trace("runtime", "describe kernel %s", l.Kernel.Name)
		meta, err := r.describeKernel(l)
		if err != nil {
			ks.broken = true
			r.reportError(fmt.Sprintf("kernel %s is not recorded: %v", l.Kernel.Demangled, err))
			return nil, ForwardAlways, Memo{}
		}
		ks.meta = meta
	}
	return &inFlight{ks: ks, l: l, dh: dh, evicted: evicted}, Launched, Memo{}
}

// endLaunch settles the kernel's instances after a launch was recorded (or
// was to be) and says what the caller may remember. r.mu is held.
func (r *Recorder) endLaunch(f *inFlight) Memo {
	ks, dh := f.ks, f.dh
	var m Memo
	if ks.meta.Instances[dh] != nil {
		ks.order = append(ks.order, dh)
		if f.evicted != nil {
			r.evicted(ks, f.evicted)
		}
		m = r.memo(ks, dh)
		m.ShapeCovered = r.capped(ks)
		m.Capped = m.ShapeCovered && !r.canEvict(ks)
	} else if f.evicted != nil {
		// The new launch was not recorded: the instance it was to replace
		// stays.
		ks.meta.Instances[f.evicted.DynamicHash] = f.evicted
	}
	return m
}

func shapeOf(l *Launch) launchShape { return launchShape{l.Grid, l.Block, l.Shared} }

func (r *Recorder) kernelState(k Kernel) *kernelState {
	key := kernelKey{k.Name, k.Module}
	ks := r.kernels[key]
	if ks == nil {
		ks = &kernelState{selected: r.cfg.Selects(k.Name, k.Demangled)}
		r.kernels[key] = ks
		if r.throughDriver {
			// Kernels are seen as they are launched, not registered.
			r.status.KernelsRegistered++
		}
	}
	return ks
}

// capped reports whether the kernel takes no new instances.
func (r *Recorder) capped(ks *kernelState) bool {
	return r.cfg.MaxRecordings > 0 && ks.meta != nil && len(ks.meta.Instances) >= r.cfg.MaxRecordings
}

// memo names a recorded instance for Memo.Repeat, once per instance.
func (r *Recorder) memo(ks *kernelState, dh string) Memo {
	if ks.repeat == nil {
		ks.repeat = map[string]int{}
	}
	id, ok := ks.repeat[dh]
	if !ok {
		r.repeats = append(r.repeats, repeatRef{ks, dh})
		id = len(r.repeats)
		ks.repeat[dh] = id
	}
	return Memo{Repeat: id}
}

// AddRepeats counts n launches the caller forwarded as repeats of the
// instance that a Memo.Repeat of id named.
func (r *Recorder) AddRepeats(id int, n uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id < 1 || id > len(r.repeats) || n == 0 {
		return
	}
	ref := r.repeats[id-1]
	inst := ref.ks.meta.Instances[ref.dh]
	if inst == nil {
		return
	}
	inst.Occurrences += int(n)
	ref.ks.dirty = true
	r.status.LaunchesSeen += int64(n)
	r.status.LaunchesSelected += int64(n)
}

// AddForwarded counts n launches of k that the caller forwarded without
// showing them (a kernel answered ForwardAlways, or a Memo.Capped one).
func (r *Recorder) AddForwarded(k Kernel, n uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ks := r.kernelState(k)
	r.status.LaunchesSeen += int64(n)
	if ks.selected {
		r.status.LaunchesSelected += int64(n)
	}
}
