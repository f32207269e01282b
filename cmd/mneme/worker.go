package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/replay"
	"github.com/mneme-gpu/mneme/tune"
)

func init() {
	rootCmd.AddCommand(&cobra.Command{
		Use:         "worker",
		Annotations: map[string]string{rawStdoutAnnotation: "yes"},
		Short:       "Serve replay requests as JSON lines on stdin/stdout (used by tune and the Python API)",
		Long: `worker holds one open replay session and executes the requests of the
JSON-lines protocol of tune/PROTOCOL.md: "open" a recorded instance, then
"compile" and "run" configurations, then "close". Responses go to stdout, logs
to stderr. After a kernel fault that leaves the GPU context unusable, the
worker answers that run and exits with code 4 so its client can restart it;
after an LLVM fatal error or crash in a compile, it answers and exits with 5.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := &replayWorker{log: cmd.ErrOrStderr()}
			err := tune.Serve(cmd.InOrStdin(), cmd.OutOrStdout(), w)
			if errors.Is(err, tune.ErrSessionUnusable) {
				code := exitKernelFault
				if w.llvmFatal {
					code = exitCompile
				}
				return withExit(code, fmt.Errorf("worker: %w", w.broken))
			}
			return err
		},
	})
}

// replayWorker serves the protocol with a replay.Session.
type replayWorker struct {
	session *replay.Session
	log     io.Writer
	broken  error // the sticky CUDA error or the LLVM fatal error that ends the worker
	// llvmFatal: broken is an LLVM fatal error or crash a compile trapped.
	llvmFatal bool
}

// checkLLVM ends the worker after a compile that trapped an LLVM fatal error
// or crash: LLVM's state in this process is then unknown, so the answer
// says Closing and a fresh worker takes the next request.
func (w *replayWorker) checkLLVM() {
	if w.broken != nil {
		return
	}
	if err := w.session.CompilerFatal(); err != nil {
		w.broken, w.llvmFatal = err, true
		fmt.Fprintln(w.log, "mneme worker: LLVM's state is unknown after this fatal error; exiting after the answer")
	}
}

func (w *replayWorker) Open(p tune.OpenParams) (tune.OpenInfo, error) {
	s, err := replay.Open(replay.Options{DB: p.DB, Kernel: p.Kernel, Instance: p.Instance, Device: p.GPU,
		Iterations: p.Iterations, Warmup: p.Warmup, Verify: p.Verify, CacheDir: p.CacheDir, CompileOnly: p.CompileOnly, ColdL2: p.ColdL2, Timer: p.Timer})
	if err != nil {
		// A missing GPU matches mneme.ErrNoGPU already: Serve answers no_gpu.
		return tune.OpenInfo{}, err
	}
	w.session = s
	if err := s.Recording().WritesError; err != nil {
		fmt.Fprintf(w.log, "mneme worker: the kernel's written element types are unknown, so verification is bitwise: %v\n", err)
	}
	info := tune.OpenInfo{Kernel: s.KernelName()}
	if !p.CompileOnly {
		d := s.Device()
		info.Device = &mneme.DeviceLimits{Name: d.Name, Arch: d.Arch(), SMCount: d.SMCount,
			MaxThreadsPerBlock: d.MaxThreadsPerBlock, MaxSharedMemPerBlock: max(d.MaxSharedPerBlockOptin, d.MaxSharedPerBlock),
			RegsPerSM: d.RegsPerSM, WarpSize: d.WarpSize}
		fmt.Fprintf(w.log, "mneme worker: opened %s on %s (timer %s)\n", s.KernelName(), d.Name, s.Timer())
	}
	return info, nil
}

func (w *replayWorker) Compile(c mneme.Config) mneme.Result {
	res, err := w.session.Compile(c)
	if err != nil {
		fmt.Fprintln(w.log, "mneme worker: compile:", err)
	}
	w.checkLLVM()
	return *res
}

func (w *replayWorker) Run(c mneme.Config) mneme.Result {
	res, err := w.session.Run(c)
	if err != nil {
		fmt.Fprintln(w.log, "mneme worker: run:", err)
	}
	if broken := w.session.BrokenError(); broken != nil {
		w.broken = broken
		fmt.Fprintln(w.log, "mneme worker: the CUDA context is unusable after this fault; exiting after the answer")
	}
	w.checkLLVM()
	return *res
}

// Unusable tells Serve that a run left the CUDA context unusable: the answer
// says so and the worker exits, to be restarted by its client.
func (w *replayWorker) Unusable() bool { return w.broken != nil }

func (w *replayWorker) Close() error {
	if w.session == nil {
		return nil
	}
	err := w.session.Close()
	w.session = nil
	return err
}
