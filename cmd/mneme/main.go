// Command mneme records CUDA kernel launches of an application, replays single
// kernels in isolation under any compile configuration, and tunes them.
//
// Each subcommand lives in its own file and registers itself on rootCmd from
// an init function, so the command set grows without a central list.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

var rootCmd = &cobra.Command{
	Use:           "mneme",
	Short:         "Record, replay and tune CUDA kernels with LLVM JIT specialization",
	SilenceUsage:  true,
	SilenceErrors: true,
}

// exitError carries an exit code through cobra where a command decides the
// code itself (flag errors); exitCode classifies every other error.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// withExit attaches an exit code to err (nil stays nil).
func withExit(code int, err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: code, err: err}
}

// usageErrorsExit2 makes cobra's own checks of a command line (unknown
// flags, bad flag values, wrong argument counts) exit with the usage code in
// every command, as the commands' own checks do.
func usageErrorsExit2(cmd *cobra.Command) {
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return withExit(exitUsage, err) })
	if cmd.HasSubCommands() && cmd.Run == nil && cmd.RunE == nil {
		// cobra would print the help and exit 0 for an unknown or missing
		// subcommand of a command that only groups others.
		cmd.RunE = missingSubcommand
	}
	if check := cmd.Args; check != nil {
		if _, done := argsChecked[cmd]; !done {
			cmd.Args = func(c *cobra.Command, args []string) error { return withExit(exitUsage, check(c, args)) }
			argsChecked[cmd] = struct{}{}
		}
	}
	for _, sub := range cmd.Commands() {
		usageErrorsExit2(sub)
	}
}

// rawStdoutAnnotation marks a command whose stdout is data, written as is:
// code (compile), protocol lines (worker, deploy compile-variant), whose
// JSON escapes control characters itself.
const rawStdoutAnnotation = "mneme/raw-stdout"

// routeOutput gives the commands marked with rawStdoutAnnotation the
// process's stdout itself, and sends every command's flag warnings (a
// deprecated flag) to stderr: cobra prints them to the command's output.
func routeOutput(cmd *cobra.Command, stderr io.Writer) {
	if cmd.Annotations[rawStdoutAnnotation] != "" {
		cmd.SetOut(os.Stdout)
	}
	cmd.Flags().SetOutput(stderr)
	for _, sub := range cmd.Commands() {
		routeOutput(sub, stderr)
	}
}

// missingSubcommand is the run of a command that groups others, reached
// with no subcommand or an unknown one: bad usage, one line naming them.
func missingSubcommand(cmd *cobra.Command, args []string) error {
	var names []string
	for _, sub := range cmd.Commands() {
		if sub.IsAvailableCommand() {
			names = append(names, sub.Name())
		}
	}
	if len(args) > 0 {
		return withExit(exitUsage, fmt.Errorf("unknown command %q for %q: want one of %s", args[0], cmd.CommandPath(), strings.Join(names, ", ")))
	}
	return withExit(exitUsage, fmt.Errorf("%s: name a command, one of %s (%s --help describes them)", cmd.CommandPath(), strings.Join(names, ", "), cmd.CommandPath()))
}

// signalGrace is how long a command may take to stop after SIGINT or
// SIGTERM before the process ends anyway.
var signalGrace = 10 * time.Second

// signalContext is a context canceled by the first SIGINT or SIGTERM, so a
// command can stop cleanly (a tuning run keeps its trials). A second
// signal, or a command still running signalGrace after the first (blocked
// where the context does not reach), ends the process with 128+signal, as a
// shell reports a process killed by it: a signal always ends a command.
// stop releases the signals.
func signalContext() (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		var first os.Signal
		select {
		case first = <-sig:
		case <-done:
			return
		}
		cancel()
		select {
		case <-sig:
		case <-time.After(signalGrace):
		case <-done:
			return
		}
		fmt.Fprintf(os.Stderr, "mneme: %v: stopped without finishing\n", first)
		code := 128 + 2
		if s, ok := first.(syscall.Signal); ok {
			code = 128 + int(s)
		}
		os.Exit(code)
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			signal.Stop(sig)
			close(done)
			cancel()
		})
	}
}

// argsChecked remembers the commands whose argument check is wrapped, so
// in-process tests that call run repeatedly wrap it once.
var argsChecked = map[*cobra.Command]struct{}{}

func main() { os.Exit(run(os.Args[1:])) }

// run executes the command line and returns the process exit code; it is
// separate from main so CLI tests can run the command in-process.
func run(args []string) int {
	usageErrorsExit2(rootCmd)
	rootCmd.SetArgs(args)
	// Every command's reports and messages quote names from files that may
	// come from elsewhere: escaped on their way out. Commands whose stdout
	// carries data (code, protocol answers) say so and write it as is.
	stdout, stderr := newTermWriter(os.Stdout), newTermWriter(os.Stderr)
	rootCmd.SetOut(stdout)
	rootCmd.SetErr(stderr)
	routeOutput(rootCmd, stderr)
	err := rootCmd.Execute()
	stdout.Flush()
	stderr.Flush()
	if err != nil && strings.HasPrefix(err.Error(), "unknown command") {
		err = withExit(exitUsage, err) // cobra's, for a subcommand that does not exist
	}
	if err == nil {
		return 0
	}
	// Messages quote names from databases and results folders that came
	// from elsewhere: escaped, so they cannot drive the terminal.
	fmt.Fprintln(os.Stderr, "mneme:", termSafe(err.Error(), true))
	return exitCode(err)
}
