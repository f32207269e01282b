package replay

import (
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
)

// Job is one replay as `mneme replay` runs it: a session opened on the
// recording, one configuration checked, run, timed and verified, and what to
// keep of it.
type Job struct {
	Options                 // the session
	Config     mneme.Config // geometry and shared memory left zero are the recording's; Passes is required
	EmitIR     string       // write the kernel's IR after extraction and specialization to this file
	SaveOutput string       // write the memory the replay produced as a snapshot into this directory
}

// Report is the document `mneme replay` prints, in Mneme's layout.
type Report struct {
	Config mneme.Config  `json:"Replay-config"`
	Result *mneme.Result `json:"Result"`
}

// StatusError is a replay that ran but did not verify: its Result says why.
type StatusError struct{ Result *mneme.Result }

func (e *StatusError) Error() string {
	switch e.Result.Status {
	case mneme.StatusFailedVerification:
		return "verification failed: " + e.Result.Mismatch
	case mneme.StatusCompileError:
		return e.Result.Error
	}
	return string(e.Result.Status) + ": " + e.Result.Error
}

// RunJob opens a session on the job's recording and replays its
// configuration once. The report is returned whenever the kernel was run,
// with or without an error, so the caller can print it before reporting the
// error. A configuration that is not valid for the recording or the device
// is an *InputError (found before any compile work where possible); a run
// whose status is not verified is a *StatusError; a machine without a GPU
// matches mneme.ErrNoGPU; a compile failure of EmitIR is a *jit.CompileError.
func RunJob(job Job) (*Report, error) {
	// An empty pipeline is the application's own, resolved against the recording.
	if job.Config.Passes != "" {
		if err := ValidatePipeline(job.Config.Passes); err != nil {
			return nil, err
		}
	}
	if job.Options.CompileOnly {
		return nil, inputErr("replay: a job runs the kernel; it cannot be compile-only")
	}
	if err := job.Options.check(); err != nil {
		return nil, err
	}
	// Every check of the input comes before the device is touched.
	rec, err := Load(job.Options.DB, job.Options.Kernel, job.Options.Instance)
	if err != nil {
		return nil, err
	}
	if err := CheckConfig(rec, job.Config); err != nil {
		rec.Close()
		return nil, err
	}
	s, err := openLoaded(job.Options, rec)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	cfg := job.Config
	if err := s.CheckLaunch(cfg); err != nil {
		return nil, mneme.BadInput(err)
	}
	if job.EmitIR != "" {
		text, err := s.PreprocessedIR(cfg)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(job.EmitIR, []byte(text), 0o644); err != nil {
			return nil, fmt.Errorf("--emit-ir: %w", err)
		}
	}
	res, runErr := s.Run(cfg)
	if job.SaveOutput != "" && res.Executed && !s.Broken() {
		if err := saveOutput(s, job.SaveOutput); err != nil {
			return nil, fmt.Errorf("--save-output: %w", err)
		}
	}
	rep := &Report{Config: s.Recording().Resolve(cfg), Result: res}
	switch {
	case runErr != nil:
		return rep, runErr
	case res.Status != mneme.StatusVerified:
		return rep, &StatusError{Result: res}
	}
	return rep, nil
}

// CheckConfig checks cfg against the recording and against what every CUDA
// device allows, without a device: specialized argument indices, launch
// bounds below the block, geometry over CUDA's limits, an invalid field.
// A failure is an *InputError.
func CheckConfig(rec *Recording, cfg mneme.Config) error {
	cfg = rec.Resolve(cfg)
	if err := cfg.Validate(); err != nil {
		return &InputError{Err: err}
	}
	n := len(rec.Kernel.ArgSizes)
	for _, i := range cfg.SpecializeArgs {
		if i >= n {
			return inputErr("specialize_args: argument %d does not exist: kernel %s has %d arguments (0..%d)", i, rec.Kernel.Name(), n, n-1)
		}
	}
	if cfg.SetLaunchBounds && uint64(cfg.MaxThreads) < cfg.Block.Count() {
		return inputErr("max_threads %d: launch bounds below the block %s of %d threads; the launch would fail", cfg.MaxThreads, cfg.Block, cfg.Block.Count())
	}
	// CUDA's own limits, the same on every device; the device's shared
	// memory limit is checked once it is known.
	cuda := mneme.DeviceLimits{MaxThreadsPerBlock: 1024, MaxSharedMemPerBlock: math.MaxInt32}
	if err := cuda.Check(cfg); err != nil {
		return &InputError{Err: err}
	}
	if cfg.Block.X > 1024 || cfg.Block.Y > 1024 || cfg.Block.Z > 64 {
		return inputErr("block %s: exceeds CUDA's block limits (1024, 1024, 64)", cfg.Block)
	}
	return nil
}

// saveOutput writes the replay's output memory as a snapshot named after the
// recorded epilogue, so the two can be compared file to file.
func saveOutput(s *Session, dir string) error {
	snap, err := s.Snapshot()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	rec := s.Recording()
	name := "DeviceState.replay." + rec.Kernel.StaticHash + "." + rec.Instance.DynamicHash + ".mneme"
	_, err = db.WriteSnapshot(filepath.Join(dir, name), snap, db.SnapshotOptions{Compress: true})
	return err
}
