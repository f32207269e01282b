package record

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/record/fingerprint"
)

// inFlight is a recorded launch between its prologue and its epilogue:
// what beginInstance decided, for endInstance once the launch has run.
type inFlight struct {
	ks   *kernelState
	l    *Launch
	dh   string
	inst *db.Instance
	// evicted is the instance the launch is to replace (instances.go),
	// put back if it is not recorded.
	evicted *db.Instance
	// Staged snapshots (dr set): the prologue's plan and the instance
	// waiting for the background writer; else copied whole (prologue).
	dr       DeviceReader
	pend     *pendingInstance
	pro      *snapshotPlan
	prologue *db.Snapshot
	took     time.Duration
}

// recordInstance performs the launch between two snapshots and writes the
// instance (beginInstance, the launch, endInstance).
func (r *Recorder) recordInstance(f *inFlight) (Decision, error) {
	if !r.beginInstance(f) {
		return Forward, nil
	}
	err := r.proc.Launch(f.l)
	if err != nil {
		r.reportError(fmt.Sprintf("kernel %s: launch failed while recording: %v", f.l.Kernel.Demangled, err))
	}
	return r.endInstance(f, err)
}

// beginInstance takes the launch's prologue. Files appear in an order that
// keeps the database valid at every moment: snapshots (each written under
// a temporary name and renamed), then the kernel file that names them.
// False: the launch is not recorded (the caller forwards it).
func (r *Recorder) beginInstance(f *inFlight) bool {
	l, dh := f.l, f.dh
	name := l.Kernel.Demangled
	Trace("runtime", "record %s begin", dh)
	if err := r.proc.Synchronize(); err != nil {
		// The application's own earlier work failed; it will see the error
		// itself, and this launch cannot be recorded in a known state.
		r.reportError(fmt.Sprintf("kernel %s: synchronize before recording: %v", name, err))
		return false
	}
	Trace("runtime", "record %s: device idle", dh)
	k := f.ks.meta
	f.inst = &db.Instance{
		DynamicHash: dh,
		Prologue:    db.PrologueFileName(k.StaticHash, dh),
		Epilogue:    db.EpilogueFileName(k.StaticHash, dh),
		BlockDims:   l.Block,
		GridDims:    l.Grid,
		SharedMem:   l.Shared,
		Args:        db.EncodeArgs(l.Args),
		Occurrences: 1,
		RecordedAt:  time.Now().UTC().Format(time.RFC3339Nano),
	}
	if r.chunks.isPlanned(f.inst.Prologue) || r.chunks.isPlanned(f.inst.Epilogue) {
		// An earlier attempt at this instance was lost after its snapshots
		// were planned; other snapshots may reference their chunks, so the
		// files must not be written again with other contents.
		return false
	}
	r.coverLive(k)
	if dr, isReader := r.proc.(DeviceReader); isReader && !r.cfg.FullCopies && r.liveBytes() >= r.stagedMin {
		f.dr = dr
		return r.beginStaged(f)
	}
	return r.beginCopied(f)
}

// endInstance takes the epilogue of a launch beginInstance began, and
// writes the instance; launchErr is the launch's result (already
// reported). It returns what the recorder returns for the launch.
func (r *Recorder) endInstance(f *inFlight, launchErr error) (Decision, error) {
	if launchErr == nil {
		launchErr = r.awaitRecorded(f)
	}
	var ok bool
	var pend *pendingInstance
	var err error
	if f.dr != nil {
		ok, pend, err = r.endStaged(f, launchErr)
	} else {
		ok, err = r.endCopied(f, launchErr)
	}
	if !ok {
		return Launched, err
	}
	k, dh := f.ks.meta, f.dh
	r.coverLive(k)
	k.Instances[dh] = f.inst
	Trace("runtime", "record %s end", dh)
	if pend != nil {
		// Its snapshots are being written: the kernel file names it once
		// they are (collect).
		return Launched, nil
	}
	start := time.Now()
	err = r.writeKernel(k)
	r.status.DBWriteSeconds += time.Since(start).Seconds()
	if err != nil {
		delete(k.Instances, dh)
		r.reportError(fmt.Sprintf("kernel %s: write %s: %v", f.l.Kernel.Demangled, db.KernelFileName(k.StaticHash), err))
		return Launched, nil
	}
	r.instanceRecorded(f.ks)
	return Launched, nil
}

// instanceRecorded counts an instance whose files and kernel file are written.
func (r *Recorder) instanceRecorded(ks *kernelState) {
	if ks.recorded == 0 {
		r.status.KernelsRecorded++
	}
	ks.recorded++
	ks.dirty = false
	r.status.InstancesRecorded++
	r.writeStatus()
}

// beginCopied copies the device state whole before the launch; false when
// it could not (reported: the launch is not recorded).
func (r *Recorder) beginCopied(f *inFlight) bool {
	pro, err := r.snapshot(f.l, 0)
	if err != nil {
		r.reportError(fmt.Sprintf("kernel %s: prologue snapshot: %v", f.l.Kernel.Demangled, err))
		return false
	}
	Trace("runtime", "record %s: prologue copied", f.dh)
	f.prologue = pro
	return true
}

// endCopied copies the device state whole after the launch, then writes
// both snapshots. ok means both were written; otherwise the instance is not
// recorded and endInstance returns err.
func (r *Recorder) endCopied(f *inFlight, launchErr error) (ok bool, err error) {
	if launchErr != nil {
		return false, launchErr
	}
	l, dh, inst, pro := f.l, f.dh, f.inst, f.prologue
	name := l.Kernel.Demangled
	epi, err := r.snapshot(l, 1)
	if err != nil {
		r.reportError(fmt.Sprintf("kernel %s: epilogue snapshot: %v", name, err))
		return false, nil
	}
	Trace("runtime", "record %s: epilogue copied", dh)
	start := time.Now()
	// No fsync: the rename alone keeps the database valid if the
	// application crashes, which is what recording must survive; an fsync
	// per snapshot would cost more than the copy on many file systems.
	pn, err := db.WriteSnapshot(filepath.Join(r.cfg.DB, inst.Prologue), pro, r.snapshotOptions(pro.RawSize()))
	if err == nil {
		var en int64
		en, err = db.WriteSnapshot(filepath.Join(r.cfg.DB, inst.Epilogue), epi, r.snapshotOptions(epi.RawSize()))
		inst.PrologueBytes, inst.EpilogueBytes = uint64(pn), uint64(en)
	}
	if err != nil {
		r.reportError(fmt.Sprintf("kernel %s: write snapshot: %v", name, err))
		return false, nil
	}
	r.status.CopiedBytes += int64(pro.RawSize() + epi.RawSize())
	r.status.SnapshotBytes += int64(inst.PrologueBytes + inst.EpilogueBytes)
	r.status.SnapshotRawBytes += int64(pro.RawSize() + epi.RawSize())
	r.status.SnapshotSeconds += time.Since(start).Seconds()
	Trace("runtime", "record %s: snapshots written", dh)
	return true, nil
}

// beginStaged snapshots the device state before the launch from
// fingerprints. Each snapshot is written at once from the live memory, or,
// where the device has the memory to spare for a shadow copy of the chunks
// to store, by the background writer while the application goes on (the
// pending instance then waits until collect sees both written). False when
// the prologue failed (reported: the launch is not recorded). A prologue
// file is written even when the instance is then lost: later snapshots may
// already reference its chunks.
func (r *Recorder) beginStaged(f *inFlight) bool {
	f.pend = &pendingInstance{ks: f.ks, inst: f.inst}
	start := time.Now()
	pro, err := r.planSnapshot(f.dr, f.l, f.inst.Prologue)
	if err == nil {
		err = r.writeOrQueue(f.dr, pro, f.pend)
	}
	if err != nil {
		r.reportError(fmt.Sprintf("kernel %s: prologue snapshot: %v", f.l.Kernel.Demangled, err))
		return false
	}
	Trace("runtime", "record %s: prologue planned", f.dh)
	f.pro, f.took = pro, time.Since(start)
	return true
}

// endStaged snapshots the device state after the launch from fingerprints.
// Results as endCopied's; pend is the instance still waiting for the
// background writer, nil when both files are written.
func (r *Recorder) endStaged(f *inFlight, launchErr error) (ok bool, pend *pendingInstance, err error) {
	pend = f.pend
	if launchErr != nil {
		pend.lost = true
		return false, nil, launchErr
	}
	name := f.l.Kernel.Demangled
	start := time.Now()
	epi, err := r.planSnapshot(f.dr, f.l, f.inst.Epilogue)
	if err == nil {
		err = r.writeOrQueue(f.dr, epi, pend)
	}
	if err != nil {
		// The launch happened: the instance is lost, not the application's work.
		pend.lost = true
		r.reportError(fmt.Sprintf("kernel %s: epilogue snapshot: %v", name, err))
		return false, nil, nil
	}
	Trace("runtime", "record %s: epilogue planned", f.dh)
	took := f.took + time.Since(start)
	r.status.SnapshotRawBytes += int64(f.pro.raw + epi.raw)
	r.status.SnapshotSeconds += took.Seconds()
	pend.planned = true
	switch {
	case pend.err != nil: // a queued snapshot failed while the other was written
		r.reportError(fmt.Sprintf("kernel %s: instance %s not recorded: %v", name, f.dh, pend.err))
		return false, nil, nil
	case pend.jobs == 0:
		return true, nil, nil
	}
	return true, pend, nil
}

// pendingInstance is an instance whose snapshots the background writer
// has yet to write.
type pendingInstance struct {
	ks      *kernelState
	inst    *db.Instance
	jobs    int  // snapshots not yet written
	planned bool // both snapshots are planned: collect may finish the instance
	lost    bool // the instance will not be recorded (its files are still written)
	err     error
}

// writeOrQueue writes a planned snapshot of the pending instance: into a shadow copy and the background queue where the
// device can spare the memory, otherwise at once from the live memory
// after the queue has drained (the files must appear in plan order).
func (r *Recorder) writeOrQueue(dr DeviceReader, p *snapshotPlan, pend *pendingInstance) error {
	queue := func(sh Shadow) {
		if r.writer == nil {
			r.writer = newBackgroundWriter(r.cfg.DB)
		}
		pend.jobs++
		r.pending[p.name] = pend
		r.writer.add(&writeJob{plan: p, shadow: sh, opts: r.snapshotOptions(p.raw)})
	}
	switch {
	case r.cfg.NoBackground:
	case len(p.runs) == 0:
		// Nothing to copy (zeros and references): behind the queued
		// snapshots, whose files it may reference, without waiting (a
		// 4 GiB prologue of zeros took 6 ms to write at once).
		queue(nil)
		return nil
	case len(p.runs) > 0:
		if sh := r.shadow(dr, p.runs); sh != nil {
			queue(sh)
			return nil
		}
		r.status.ShadowRefusals++
	}
	if r.writer != nil {
		r.writer.wait()
		r.collect()
		if err := r.writer.failedReference(p.refs); err != nil {
			r.chunks.forget(p)
			return err
		}
	}
	start := time.Now()
	live := func() (Staging, error) { return dr.Stage(p.runs) }
	n, st, err := writePlan(live, r.cfg.DB, p, r.snapshotOptions(p.raw))
	r.status.addCopies(st)
	r.status.CopySeconds += time.Since(start).Seconds() // the copies overlap the writing: one figure for both
	if err != nil {
		r.chunks.forget(p)
		return err
	}
	r.status.SnapshotBytes += n
	pend.written(p.name, n)
	return nil
}

// shadow copies runs for the background writer where the configuration
// and the memory allow: on the device first (copied now at the device's
// speed, milliseconds for gigabytes; the reader then moves it into host
// memory in the background, or the writer drains it as it encodes), else
// into host memory at once (at the bus's speed, bound by the host's supply
// of fresh pages: a quarter of a second for 4 GiB on an H100 machine); nil
// when neither can be had.
//
// Under ShadowAuto a snapshot of less than deviceShadowMin bytes goes to
// host memory first: copied in well under a millisecond, it costs less
// than a device allocation and leaves the background no driver call to
// make (such calls wait while the application's thread is inside a
// synchronizing call: an 8 KiB drain waited 0.26 s for `tracer`'s final
// cudaMemcpy on an H100).
func (r *Recorder) shadow(dr DeviceReader, runs []fingerprint.Range) Shadow {
	start := time.Now()
	defer func() { r.status.ShadowSeconds += time.Since(start).Seconds() }()
	device := func() Shadow {
		if r.cfg.Shadow == ShadowHost {
			return nil
		}
		sh, err := dr.Shadow(runs)
		if err != nil {
			Trace("runtime", "device shadow refused: %v", err)
			return nil
		}
		r.status.DeviceShadows++
		return sh
	}
	host := func() Shadow {
		if r.cfg.Shadow == ShadowDevice {
			return nil
		}
		sh, err := dr.HostShadow(runs)
		if err != nil {
			Trace("runtime", "host shadow refused: %v", err)
			return nil
		}
		r.status.HostShadows++
		return sh
	}
	first, second := device, host
	var n uint64
	for _, run := range runs {
		n += run.Len
	}
	if n < r.deviceShadowMin {
		first, second = host, device
	}
	if sh := first(); sh != nil {
		return sh
	}
	return second()
}

// written records the size of one of the instance's snapshot files.
func (pend *pendingInstance) written(name string, n int64) {
	if name == pend.inst.Prologue {
		pend.inst.PrologueBytes = uint64(n)
	} else {
		pend.inst.EpilogueBytes = uint64(n)
	}
}

// collect takes what the background writer finished: sizes and figures
// into the instances and the status, failed files out of the content
// store, and each instance whose snapshots are all written into its kernel
// file (or, if one failed, out of the recording).
func (r *Recorder) collect() {
	if r.writer == nil {
		return
	}
	for _, j := range r.writer.take() {
		pend := r.pending[j.plan.name]
		delete(r.pending, j.plan.name)
		r.status.addCopies(j.stats)
		r.status.BackgroundSeconds += j.seconds
		if j.err != nil {
			r.chunks.forget(j.plan)
		} else {
			r.status.SnapshotBytes += j.size
		}
		if pend == nil {
			continue
		}
		pend.jobs--
		switch {
		case j.err != nil && pend.err == nil:
			pend.err = fmt.Errorf("write %s: %w", j.plan.name, j.err)
		case j.err == nil:
			pend.written(j.plan.name, j.size)
		}
		if pend.jobs > 0 || pend.lost || !pend.planned {
			continue
		}
		k := pend.ks.meta
		if pend.err == nil {
			if err := r.writeKernel(k); err != nil {
				pend.err = fmt.Errorf("write %s: %w", db.KernelFileName(k.StaticHash), err)
			}
		}
		if pend.err != nil {
			delete(k.Instances, pend.inst.DynamicHash)
			r.reportError(fmt.Sprintf("kernel %s: instance %s not recorded: %v", k.DemangledName, pend.inst.DynamicHash, pend.err))
			continue
		}
		r.instanceRecorded(pend.ks)
	}
}

// awaitRecorded waits for a recorded launch the device has been given;
// an error is its fault, already reported.
func (r *Recorder) awaitRecorded(f *inFlight) error {
	if err := r.proc.Synchronize(); err != nil {
		r.reportError(fmt.Sprintf("kernel %s faulted while recording: %v", f.l.Kernel.Demangled, err))
		return err
	}
	Trace("runtime", "record %s: launched", f.dh)
	return nil
}

// writeKernel replaces the kernel's JSON file. Like the snapshots it is
// renamed into place without an fsync: valid whenever the application dies.
func (r *Recorder) writeKernel(k *db.Kernel) error {
	if len(r.pending) > 0 {
		// Only instances whose snapshots are written may be named.
		c := *k
		c.Instances = map[string]*db.Instance{}
		for dh, inst := range k.Instances {
			if r.pending[inst.Prologue] == nil && r.pending[inst.Epilogue] == nil {
				c.Instances[dh] = inst
			}
		}
		k = &c
	}
	data, err := db.MarshalKernel(k)
	if err != nil {
		return err
	}
	return db.ReplaceFile(filepath.Join(r.cfg.DB, db.KernelFileName(k.StaticHash)), data)
}

// snapshot copies every live arena block, the kernel module's device
// globals and the argument bytes.
// set picks the buffers (0: prologue, 1: epilogue), reused from one
// instance to the next: first touches of fresh host pages, not the
// transfer, dominate the copy time of large snapshots.
func (r *Recorder) snapshot(l *Launch, set int) (*db.Snapshot, error) {
	start := time.Now()
	defer func() { r.status.CopySeconds += time.Since(start).Seconds() }()
	s := &db.Snapshot{Args: l.Args}
	for i, b := range r.live() {
		data := r.buffer(set, i, b.Size)
		if err := r.proc.CopyToHost(data, b.Addr); err != nil {
			return nil, fmt.Errorf("copy allocation %#x (%d bytes): %w", b.Addr, b.Size, err)
		}
		s.Blobs = append(s.Blobs, db.Blob{Addr: b.Addr, Size: b.Size, Data: data})
	}
	if err := r.copyGlobals(s, l); err != nil {
		return nil, err
	}
	return s, nil
}

// buffer returns buffer i of a set with length n, reusing its memory.
func (r *Recorder) buffer(set, i int, n uint64) []byte {
	bufs := &r.buffers[set]
	for len(*bufs) <= i {
		*bufs = append(*bufs, nil)
	}
	if uint64(cap((*bufs)[i])) < n {
		r.bufferBytes += n - uint64(cap((*bufs)[i]))
		(*bufs)[i] = make([]byte, n)
	}
	b := (*bufs)[i][:n]
	if r.bufferBytes > maxReusedBuffers {
		r.buffers = [2][][]byte{}
		r.bufferBytes = 0
	}
	return b
}

// minCompressedSnapshot is the raw size from which compression is worth its
// cost inside the application: below it, writing the raw bytes is faster than
// compressing them (measured on the H200 machine: a 4 MiB recording took
// 11 ms with zstd, while 512 MiB wrote at 13.8 GB/s with it and 2.1 raw).
const minCompressedSnapshot = 16 << 20

// minStagedBytes is the live device memory from which snapshots are taken
// from fingerprints and staged copies: below it a whole copy takes less
// than loading the fingerprint kernel (a driver JIT of tens of ms, once).
const minStagedBytes = 64 << 20

// deviceShadowMin is the smallest snapshot ShadowAuto copies on the device
// before trying host memory.
const deviceShadowMin = 4 << 20

// maxReusedBuffers bounds the snapshot buffers kept between instances; an
// application with more live memory than this gets fresh buffers each time,
// so recording does not pin twice its device memory in host memory for good.
const maxReusedBuffers = 8 << 30

// snapshotOptions are the write options of a snapshot holding raw bytes of
// data. Chunks and byte planes are compressed with S2
// (db.SnapshotOptions.Fast): the application waits for these
// writes, or shares the CPU with them.
func (r *Recorder) snapshotOptions(raw uint64) db.SnapshotOptions {
	compress := r.cfg.Compress && raw >= minCompressedSnapshot
	return db.SnapshotOptions{Compress: compress, Fast: compress, NoSync: true}
}
