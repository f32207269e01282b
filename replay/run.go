package replay

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/cuda"
	"github.com/mneme-gpu/mneme/jit"
)

// newResult starts a Result with what every outcome carries.
func (s *Session) newResult() *mneme.Result {
	return &mneme.Result{
		StartTime: time.Now().UTC().Format(time.RFC3339Nano),
		GPUID:     s.opts.Device,
		GPUName:   s.props.Name,
		Timer:     s.Timer(),
		ExecTime:  []float64{},
	}
}

func finish(res *mneme.Result, status mneme.Status, err error) *mneme.Result {
	res.Status = status
	if err != nil {
		res.Error = err.Error()
	}
	switch status {
	case mneme.StatusVerified, mneme.StatusFailedVerification:
	default:
		res.Failed = true
	}
	res.EndTime = time.Now().UTC().Format(time.RFC3339Nano)
	return res
}

func (s *Session) request(cfg mneme.Config) *jit.Request {
	return &jit.Request{Name: s.rec.IRPath, IR: s.rec.IR, Kernel: s.rec.Kernel.KernelName, Config: cfg, Args: s.rec.Args, Keep: s.rec.globalNames}
}

// fillCompile copies the compiler's report into the Result.
func fillCompile(res *mneme.Result, out *jit.Output) {
	res.PreprocessIRTime = out.Times.Preprocess.Seconds()
	res.OptTime = out.Times.Optimize.Seconds()
	res.CodegenTime = out.Times.Codegen.Seconds()
	res.PtxasTime = out.Times.Ptxas.Seconds()
	res.CacheHit = out.CacheHit
	res.ObjSize = out.ObjSize
	res.RegUsage = out.Registers
	res.SpillStores, res.SpillLoads = out.SpillStores, out.SpillLoads
	res.LocalMemUsage, res.ConstMemUsage, res.SharedMemUsage = out.LocalBytes, out.ConstBytes, out.SharedBytes
	res.PtxasOptions = out.PtxasOptions
}

// Compile compiles cfg into the jit cache without running it, so a later Run
// of the same configuration is a cache hit. The Result holds the compile
// fields and status verified (meaning: compiled), invalid_config or
// compile_error; the error is for internal failures only.
func (s *Session) Compile(cfg mneme.Config) (*mneme.Result, error) {
	res := s.newResult()
	cfg = s.rec.Resolve(cfg)
	if err := cfg.Validate(); err != nil {
		return finish(res, mneme.StatusInvalidConfig, err), nil
	}
	if err := s.rec.MachineCodeCheck(cfg); err != nil {
		return finish(res, mneme.StatusInvalidConfig, err), nil
	}
	if cfg.Original {
		if !s.rec.HasOriginal() {
			return finish(res, mneme.StatusCompileError, errors.New("the recording holds no device code of the application")), nil
		}
		res.ObjSize = len(s.rec.DeviceCode)
		return finish(res, mneme.StatusVerified, nil), nil
	}
	if reassembles(s.rec, cfg) {
		// The recorded PTX is assembled by the driver when the
		// configuration runs (loadReassembled); there is no IR to compile.
		// Only its presence is checked here.
		if _, err := EmbeddedPTX(s.rec.DeviceCode, s.rec.Kernel.KernelName, s.ptxArch()); err != nil {
			return finish(res, mneme.StatusCompileError, err), nil
		}
		return finish(res, mneme.StatusVerified, nil), nil
	}
	out, err := s.comp.Compile(s.request(cfg))
	if err != nil {
		return finish(res, mneme.StatusCompileError, err), nil
	}
	fillCompile(res, out)
	return finish(res, mneme.StatusVerified, nil), nil
}

// PreprocessedIR is the kernel's textual IR after extraction and
// specialization under cfg, before optimization.
func (s *Session) PreprocessedIR(cfg mneme.Config) (string, error) {
	return s.comp.PreprocessedIR(s.request(s.rec.Resolve(cfg)))
}

// checkLaunch rejects geometry and shared memory the device cannot launch.
func (s *Session) checkLaunch(cfg mneme.Config) error {
	p := s.props
	b, g := cfg.Block, cfg.Grid
	if int(b.Count()) > p.MaxThreadsPerBlock {
		return fmt.Errorf("block %s: %d threads exceed the device's %d per block", b, b.Count(), p.MaxThreadsPerBlock)
	}
	for i, v := range []uint32{b.X, b.Y, b.Z} {
		if int(v) > p.MaxBlockDim[i] {
			return fmt.Errorf("block %s: dimension %c is %d, the device allows %d", b, "xyz"[i], v, p.MaxBlockDim[i])
		}
	}
	for i, v := range []uint32{g.X, g.Y, g.Z} {
		if int(v) > p.MaxGridDim[i] {
			return fmt.Errorf("grid %s: dimension %c is %d, the device allows %d", g, "xyz"[i], v, p.MaxGridDim[i])
		}
	}
	if limit := max(p.MaxSharedPerBlockOptin, p.MaxSharedPerBlock); int(cfg.SharedMem) > limit {
		return fmt.Errorf("shared memory %d bytes exceeds the device's limit of %d bytes per block", cfg.SharedMem, limit)
	}
	return nil
}

// CheckLaunch reports whether the device can launch cfg's geometry and
// shared memory at all (the kernel's own limits are checked by Run).
func (s *Session) CheckLaunch(cfg mneme.Config) error {
	if s.ctx == nil {
		return errors.New("compile-only session: no device")
	}
	return s.checkLaunch(s.rec.Resolve(cfg))
}

// Run replays the kernel under cfg: compile (or take from the cache), reset
// memory to the prologue, run once and verify against the epilogue, then run
// Warmup untimed and Iterations timed launches, each from the prologue state.
// Compile errors, invalid launches, faults and verification failures are in
// the Result's Status; the error is for internal failures only.
func (s *Session) Run(cfg mneme.Config) (*mneme.Result, error) {
	res := s.newResult()
	if s.ctx == nil {
		return finish(res, mneme.StatusInternalError, errors.New("compile-only session: Run needs a GPU")), errors.New("replay: Run on a compile-only session")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return finish(res, mneme.StatusInternalError, errors.New("session closed")), errors.New("replay: Run after Close")
	}
	if s.broken != nil {
		return finish(res, mneme.StatusInternalError, ErrBroken), ErrBroken
	}
	cfg = s.rec.Resolve(cfg)
	if err := cfg.Validate(); err != nil {
		return finish(res, mneme.StatusInvalidConfig, err), nil
	}
	if err := s.rec.MachineCodeCheck(cfg); err != nil {
		return finish(res, mneme.StatusInvalidConfig, err), nil
	}
	if err := s.checkLaunch(cfg); err != nil {
		return finish(res, mneme.StatusInvalidLaunch, err), nil
	}

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := s.ctx.SetCurrent(); err != nil {
		return s.deviceFailure(res, err)
	}
	lk, out, err := s.load(cfg)
	if out != nil {
		fillCompile(res, out)
	}
	if err != nil {
		var ce *jit.CompileError
		if errors.As(err, &ce) {
			return finish(res, mneme.StatusCompileError, err), nil
		}
		return s.deviceFailure(res, err)
	}
	if res.RegUsage == 0 {
		res.RegUsage = lk.attrs.Registers
	}
	res.LocalMemUsage, res.ConstMemUsage, res.SharedMemUsage = lk.attrs.LocalBytes, lk.attrs.ConstBytes, lk.attrs.SharedBytes
	if n := int(cfg.Block.Count()); lk.attrs.MaxThreadsPerBlock > 0 && n > lk.attrs.MaxThreadsPerBlock {
		return finish(res, mneme.StatusInvalidLaunch, fmt.Errorf("block %s: %d threads, but the compiled kernel allows at most %d (registers or launch bounds)", cfg.Block, n, lk.attrs.MaxThreadsPerBlock)), nil
	}
	if err := s.prepareShared(lk, cfg.SharedMem); err != nil {
		return finish(res, mneme.StatusInvalidLaunch, err), nil
	}

	// First run, from the prologue, verified.
	// Every global is restored: a freshly loaded module holds its
	// initializers, not the recorded values.
	resets, _ := s.resetPlan(lk, s.trusted)
	s.trusted = false // until this run shows the kernel writes only what it should
	if err := s.resetAll(resets, lk.globals); err != nil {
		return s.deviceFailure(res, err)
	}
	if err := lk.fn.Launch(cfg.Grid, cfg.Block, cfg.SharedMem, s.stream, s.rec.Args); err != nil {
		return s.launchFailure(res, err)
	}
	if err := s.stream.Synchronize(); err != nil {
		return s.launchFailure(res, err)
	}
	res.Executed = true
	s.last = lk
	t := time.Now()
	verified, safe, mismatch, figures, err := s.verify(lk)
	res.VerifyTime = since(t)
	if err != nil {
		return s.deviceFailure(res, err)
	}
	res.Verified, res.Mismatch, res.Verification = verified && s.opts.Verify.Mode != mneme.VerifyNone, mismatch, figures

	// Timed runs: a partial reset only when this run showed it is enough.
	partialOK := safe && !s.opts.FullReset
	resets, globals := s.resetPlan(lk, partialOK)
	if err := s.timedRuns(res, lk, cfg, resets, globals); err != nil {
		if errors.Is(err, errLaunch) {
			return s.launchFailure(res, errors.Unwrap(err))
		}
		return s.deviceFailure(res, err)
	}
	s.trusted = safe

	if !verified {
		return finish(res, mneme.StatusFailedVerification, errors.New(mismatch)), nil
	}
	return finish(res, mneme.StatusVerified, nil), nil
}

// resetPlan is what to restore before a launch: only the changed ranges and
// changed globals when partial is true, else everything.
func (s *Session) resetPlan(lk *loadedKernel, partial bool) ([]resetCopy, []boundGlobal) {
	if !partial {
		return s.full, lk.globals
	}
	var gs []boundGlobal
	for _, g := range lk.globals {
		if g.slot.Changed {
			gs = append(gs, g)
		}
	}
	return s.partial, gs
}

// resetAll enqueues the copies from the device prologue image on the stream.
func (s *Session) resetAll(copies []resetCopy, globals []boundGlobal) error {
	for _, c := range copies {
		if err := cuda.MemcpyDtoDAsync(c.Dst, s.proCopy+c.SrcOff, c.Size, s.stream); err != nil {
			return err
		}
	}
	for _, g := range globals {
		if g.slot.Size == 0 {
			continue
		}
		if err := cuda.MemcpyDtoDAsync(g.addr, s.proCopy+g.slot.Off, g.slot.Size, s.stream); err != nil {
			return err
		}
	}
	return nil
}

// errLaunch marks a launch or synchronization failure of the replayed kernel.
var errLaunch = errors.New("launch failed")

type launchErr struct{ err error }

func (e *launchErr) Error() string        { return e.err.Error() }
func (e *launchErr) Is(target error) bool { return target == errLaunch }
func (e *launchErr) Unwrap() error        { return e.err }

// timedRuns launches Warmup+Iterations times, each after a reset, and fills
// the execution times and the host-side time split.
func (s *Session) timedRuns(res *mneme.Result, lk *loadedKernel, cfg mneme.Config, resets []resetCopy, globals []boundGlobal) error {
	warm, iters := s.opts.Warmup, s.opts.Iterations
	total := warm + iters
	// With CUPTI, one flush after the loop collects this Run's records; the
	// timed launches are the kernel's last iters records (the first run and
	// the verification kernels come before them or under another name). A
	// flush costs hundreds of microseconds, so there is no second one.
	if s.timer == nil {
		if err := s.ensureEvents(2 * iters); err != nil {
			return err
		}
	}
	var resetT, launchT time.Duration
	for i := 0; i < total; i++ {
		t0 := time.Now()
		if err := s.resetAll(resets, globals); err != nil {
			return err
		}
		if s.opts.ColdL2 {
			if err := s.evictL2(uint32(i)); err != nil {
				return err
			}
		}
		t1 := time.Now()
		timed := i >= warm
		if timed && s.timer == nil {
			if err := s.events[2*(i-warm)].Record(s.stream); err != nil {
				return err
			}
		}
		if err := lk.fn.Launch(cfg.Grid, cfg.Block, cfg.SharedMem, s.stream, s.rec.Args); err != nil {
			return &launchErr{err}
		}
		if timed && s.timer == nil {
			if err := s.events[2*(i-warm)+1].Record(s.stream); err != nil {
				return err
			}
		}
		resetT += t1.Sub(t0)
		launchT += time.Since(t1)
	}
	t := time.Now()
	if err := s.stream.Synchronize(); err != nil {
		return &launchErr{err}
	}
	syncT := time.Since(t)
	res.ResetTime = resetT.Seconds() / float64(total)
	res.LaunchTime = launchT.Seconds() / float64(total)
	res.SyncTime = syncT.Seconds() / float64(total)

	if s.timer != nil {
		recs, err := s.timer.Flush()
		if err != nil {
			return err
		}
		times := kernelTimes(recs, lk.out.Kernel)
		if len(times) < iters {
			return fmt.Errorf("CUPTI reported %d launches of %s, expected at least the %d timed ones", len(times), lk.out.Kernel, iters)
		}
		res.ExecTime = times[len(times)-iters:]
		return nil
	}
	res.ExecTime = make([]float64, iters)
	for i := range iters {
		d, err := cuda.Elapsed(s.events[2*i], s.events[2*i+1])
		if err != nil {
			return err
		}
		res.ExecTime[i] = float64(d.Nanoseconds())
	}
	return nil
}

// evictL2 enqueues a write of twice the L2 cache's size on the stream, so
// the next launch finds none of its inputs in L2 (ColdL2). The value
// changes per launch so no write is skipped as redundant.
func (s *Session) evictL2(v uint32) error {
	if s.flush == 0 {
		n := 2 * uint64(max(s.props.L2Bytes, 1<<20))
		p, err := cuda.MemAlloc(n)
		if err != nil {
			return fmt.Errorf("the L2 eviction buffer (%d bytes): %w", n, err)
		}
		s.flush, s.flushLen = p, n
	}
	return cuda.MemsetD32Async(s.flush, v, s.flushLen/4, s.stream)
}

// kernelTimes are the durations (ns) of the records of one kernel, in launch order.
func kernelTimes(recs []cuda.KernelRecord, name string) []float64 {
	var mine []cuda.KernelRecord
	for _, r := range recs {
		if r.Name == name {
			mine = append(mine, r)
		}
	}
	slices.SortFunc(mine, func(a, b cuda.KernelRecord) int {
		if a.Start != b.Start {
			if a.Start < b.Start {
				return -1
			}
			return 1
		}
		return int(a.CorrelationID) - int(b.CorrelationID)
	})
	out := make([]float64, len(mine))
	for i, r := range mine {
		out[i] = float64(r.End - r.Start)
	}
	return out
}

func (s *Session) ensureEvents(n int) error {
	for len(s.events) < n {
		e, err := cuda.NewEvent()
		if err != nil {
			return err
		}
		s.events = append(s.events, e)
	}
	return nil
}

// prepareShared allows the dynamic shared memory cfg asks for, beyond the
// default 48 KiB when the device can opt in.
func (s *Session) prepareShared(lk *loadedKernel, dynamic uint32) error {
	static := lk.attrs.SharedBytes
	limit := max(s.props.MaxSharedPerBlockOptin, s.props.MaxSharedPerBlock)
	if static+int(dynamic) > limit {
		return fmt.Errorf("shared memory %d bytes dynamic + %d static exceeds the device's limit of %d bytes per block", dynamic, static, limit)
	}
	if int(dynamic) > lk.maxDynamic {
		if err := lk.fn.SetMaxDynamicShared(int(dynamic)); err != nil {
			return fmt.Errorf("shared memory %d bytes: %w", dynamic, err)
		}
		lk.maxDynamic = int(dynamic)
	}
	return nil
}

// launchFailure classifies an error of the replayed kernel's launch or
// synchronization: refused before running (invalid_launch) or a fault
// (runtime_error); a sticky fault breaks the session.
func (s *Session) launchFailure(res *mneme.Result, err error) (*mneme.Result, error) {
	if cuda.IsSticky(err) {
		s.broken = err
		return finish(res, mneme.StatusRuntimeError, err), nil
	}
	s.trusted = false
	if cuda.IsInvalidLaunch(err) {
		return finish(res, mneme.StatusInvalidLaunch, err), nil
	}
	return finish(res, mneme.StatusRuntimeError, err), nil
}

// deviceFailure is a failure of our own device work (copies, verification):
// an internal error, which a sticky error also makes permanent.
func (s *Session) deviceFailure(res *mneme.Result, err error) (*mneme.Result, error) {
	s.trusted = false
	if cuda.IsSticky(err) {
		s.broken = err
		return finish(res, mneme.StatusRuntimeError, err), nil
	}
	return finish(res, mneme.StatusInternalError, err), err
}

// load compiles cfg (or takes it from the cache) and loads it into the
// context, keeping up to maxLoaded modules.
// It also returns this request's compiler report (with its cache hit).
func (s *Session) load(cfg mneme.Config) (*loadedKernel, *jit.Output, error) {
	if reassembles(s.rec, cfg) {
		return s.loadReassembled(cfg)
	}
	if cfg.Original {
		return s.loadOriginal()
	}
	out, err := s.comp.Compile(s.request(cfg))
	if err != nil {
		return nil, nil, err
	}
	if lk, ok := s.loaded[out.Key]; ok {
		s.touch(out.Key)
		return lk, out, nil
	}
	image := out.Cubin
	if image == nil {
		image = out.PTX
	}
	return s.keep(out, image)
}

// originalKey names the application's own code among the loaded modules; a
// compile key is a hex hash and never equals it.
const originalKey = "application code"

// loadOriginal loads the fat binary the application registered: the driver
// picks the cubin for this GPU (or JIT-compiles its PTX), exactly as the
// CUDA runtime did in the application.
func (s *Session) loadOriginal() (*loadedKernel, *jit.Output, error) {
	if !s.rec.HasOriginal() {
		return nil, nil, &jit.CompileError{Stage: "load", Err: errors.New("the recording holds no device code of the application (recorded before mneme kept it): replay the recompiled baseline instead")}
	}
	out := &jit.Output{Key: originalKey, Kernel: s.rec.Kernel.KernelName, ObjSize: len(s.rec.DeviceCode)}
	if lk, ok := s.loaded[originalKey]; ok {
		s.touch(originalKey)
		return lk, out, nil
	}
	return s.keep(out, s.rec.DeviceCode)
}

// keep loads a module image, binds the kernel and keeps the module among
// the most recently used ones.
func (s *Session) keep(out *jit.Output, image []byte) (*loadedKernel, *jit.Output, error) {
	mod, err := cuda.LoadModule(image)
	if err != nil {
		return nil, out, err
	}
	lk := &loadedKernel{out: out, mod: mod}
	if err := s.bind(lk); err != nil {
		mod.Unload()
		return nil, out, err
	}
	s.loaded[out.Key] = lk
	s.lru = append(s.lru, out.Key)
	for len(s.lru) > maxLoaded {
		old := s.lru[0]
		s.lru = s.lru[1:]
		if s.loaded[old] == s.last {
			s.last = nil
		}
		s.loaded[old].mod.Unload()
		delete(s.loaded, old)
	}
	return lk, out, nil
}

func (s *Session) touch(key string) {
	if i := slices.Index(s.lru, key); i >= 0 {
		s.lru = append(append(s.lru[:i:i], s.lru[i+1:]...), key)
	}
}

// bind finds the kernel, its attributes and the recorded globals in a loaded
// module, and checks that its parameters match the recorded arguments.
func (s *Session) bind(lk *loadedKernel) error {
	var err error
	if lk.fn, err = lk.mod.Function(lk.out.Kernel); err != nil {
		return err
	}
	if lk.attrs, err = lk.fn.Attributes(); err != nil {
		return err
	}
	params, err := lk.fn.ParamInfo()
	if err != nil {
		return err
	}
	if len(params) != len(s.rec.Args) {
		return fmt.Errorf("the compiled kernel takes %d parameters, the recording has %d arguments", len(params), len(s.rec.Args))
	}
	for i, p := range params {
		if int(p.Size) != len(s.rec.Args[i]) {
			return fmt.Errorf("parameter %d is %d bytes in the compiled kernel, %d bytes in the recording", i, p.Size, len(s.rec.Args[i]))
		}
	}
	for i, g := range s.lay.globals {
		addr, size, err := lk.mod.Global(g.Name)
		if err != nil {
			if cuda.IsNotFound(err) {
				continue // optimized away: this kernel cannot read or write it
			}
			return err
		}
		if uint64(size) != g.Size {
			return fmt.Errorf("device global %s: %d bytes in the compiled module, %d in the recording", g.Name, size, g.Size)
		}
		lk.globals = append(lk.globals, boundGlobal{slot: g, index: i, addr: uint64(addr)})
	}
	return nil
}
