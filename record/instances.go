package record

import "github.com/mneme-gpu/mneme/db"

// Which launches become instances under --max-recordings N.
//
// Until a kernel has N instances, every distinct launch is recorded, as
// without a cap. Once it has N, a launch of a shape (grid, block, dynamic
// shared memory) that no instance has takes the place of one that stands
// for less:
//
//  1. the latest instance of the shape with the most instances, while a
//     shape has two or more (a step counter's second value gives way to a
//     problem size not seen yet);
//  2. else the instance of the smallest shape (by threads launched, then
//     shared memory), when the new shape is larger: a kernel's launch on
//     more threads is, as a rule, the one that takes more of its time, and
//     the future is unknown when a launch is decided.
//
// A kernel gives way at most N + evictionSlack times, so recording it costs
// at most 2N + evictionSlack launches' snapshots. A replaced instance leaves
// the kernel file; its snapshot files stay, since later snapshots may
// reference their chunks. Instances whose snapshots are still being written
// are never replaced.
const evictionSlack = 8

// shapeOfInstance is an instance's launch shape.
func shapeOfInstance(inst *db.Instance) launchShape {
	return launchShape{inst.GridDims, inst.BlockDims, inst.SharedMem}
}

// smaller orders shapes by the threads they launch, then shared memory.
func (a launchShape) smaller(b launchShape) bool {
	ta, tb := a.grid.Count()*a.block.Count(), b.grid.Count()*b.block.Count()
	if ta != tb {
		return ta < tb
	}
	return a.shared < b.shared
}

// canEvict reports whether the kernel may still give an instance's place
// to a new shape.
func (r *Recorder) canEvict(ks *kernelState) bool {
	return ks.evictions < r.cfg.MaxRecordings+evictionSlack
}

// makeRoom takes out of the kernel's instances the one that shape should
// replace, and returns it; nil when shape is not new or none should give
// way. The caller records the new launch, then calls evicted, or puts the
// instance back if the launch was not recorded.
func (r *Recorder) makeRoom(ks *kernelState, shape launchShape) *db.Instance {
	if !r.canEvict(ks) {
		return nil
	}
	k := ks.meta
	count := map[launchShape]int{}
	for _, inst := range k.Instances {
		count[shapeOfInstance(inst)]++
	}
	if count[shape] > 0 {
		return nil
	}
	settled := func(inst *db.Instance) bool {
		return r.pending[inst.Prologue] == nil && r.pending[inst.Epilogue] == nil
	}
	// 1. The latest instance of the shape with the most instances.
	var dup launchShape
	most := 1
	for sh, n := range count {
		if n > most || (n == most && n > 1 && sh.smaller(dup)) {
			dup, most = sh, n
		}
	}
	if most > 1 {
		for i := len(ks.order) - 1; i >= 0; i-- {
			inst := k.Instances[ks.order[i]]
			if inst != nil && shapeOfInstance(inst) == dup && settled(inst) {
				delete(k.Instances, inst.DynamicHash)
				return inst
			}
		}
		return nil
	}
	// 2. The smallest shape, when the new one is larger.
	var victim *db.Instance
	for _, dh := range ks.order {
		inst := k.Instances[dh]
		if inst != nil && settled(inst) && (victim == nil || shapeOfInstance(inst).smaller(shapeOfInstance(victim))) {
			victim = inst
		}
	}
	if victim == nil || !shapeOfInstance(victim).smaller(shape) {
		return nil
	}
	delete(k.Instances, victim.DynamicHash)
	return victim
}

// evicted counts an instance that gave its place to a new shape, whose
// launch is now recorded, and drops it from the kernel's order.
func (r *Recorder) evicted(ks *kernelState, inst *db.Instance) {
	ks.evictions++
	for i, dh := range ks.order {
		if dh == inst.DynamicHash {
			ks.order = append(ks.order[:i], ks.order[i+1:]...)
			break
		}
	}
	Trace("runtime", "instance %s of %s gave its place to a new launch shape", inst.DynamicHash, ks.meta.KernelName)
	r.status.InstancesReplaced++
}
