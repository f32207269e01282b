// Command mneme records CUDA kernel launches of an application, replays single
// kernels in isolation under any compile configuration, and tunes them.
//
// Each subcommand lives in its own file and registers itself on rootCmd from
// an init function, so the command set grows without a central list.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

var rootCmd = &cobra.Command{
	Use:           "mneme",
	Short:         "Record, replay and tune CUDA kernels with LLVM JIT specialization",
	SilenceUsage:  true,
	SilenceErrors: true,
}

// exitError carries a documented exit code through cobra.
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

func main() { os.Exit(run(os.Args[1:])) }

// run executes the command line and returns the process exit code; it is
// separate from main so CLI tests can run the command in-process.
func run(args []string) int {
	rootCmd.SetArgs(args)
	err := rootCmd.Execute()
	if err == nil {
		return 0
	}
	fmt.Fprintln(os.Stderr, "mneme:", err)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 1
}
