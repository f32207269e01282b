package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mneme-gpu/mneme/appabi"
	"github.com/mneme-gpu/mneme/llvm"
	"github.com/mneme-gpu/mneme/toolchain"
)

// The compiler wrappers take the compiler's own command line, so cobra must
// not parse it: every argument, --help and --version included, goes to clang.
func newWrapperCommand(name string, cxx bool) *cobra.Command {
	lang := "C"
	if cxx {
		lang = "C++ and CUDA"
	}
	return &cobra.Command{
		Use:   name + " [COMPILER ARGS...]",
		Short: fmt.Sprintf("%s compiler wrapper that builds recordable programs (what `mneme config %s` names)", lang, name),
		Long: fmt.Sprintf(`mneme %s runs clang-%d with the given arguments. CUDA sources are compiled for the
GPU's architecture with CUDA 13's headers and their device IR is embedded in the
object (section mneme_ir); links add the mneme runtime shim and the CUDA call
interception. Other sources and flags pass through unchanged.

Environment: MNEME_CLANG / MNEME_CLANGXX (compiler), CUDA_PATH or CUDA_HOME (toolkit),
MNEME_CUDA_ARCH (sm_XX when no --cuda-gpu-arch is given), MNEME_PREFIX (install prefix),
MNEME_VERBOSE=1 (print every step), MNEME_KEEP_TEMPS=1 (keep intermediate files).`, name, toolchain.LLVMMajor),
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runWrapper(cxx, args)
		},
	}
}

func init() {
	rootCmd.AddCommand(newWrapperCommand("cc", false), newWrapperCommand("cxx", true))
	toolchain.JITAnnotationsOf = jitAnnotationsOf
}

// jitAnnotationsOf lists a unit's annotate("jit") kernels for the wrapper to
// embed, so the shim specializes them at run time.
func jitAnnotationsOf(bitcode []byte, source string) ([]appabi.JITAnnotation, error) {
	m, err := llvm.ParseBitcode(bitcode, source)
	if err != nil {
		return nil, fmt.Errorf("device IR of %s: %w", source, err)
	}
	defer m.Dispose()
	anns, err := m.JITAnnotations()
	if err != nil {
		return nil, err
	}
	out := make([]appabi.JITAnnotation, len(anns))
	for i, a := range anns {
		out[i] = appabi.JITAnnotation{Kernel: a.Kernel, Args: a.Args}
	}
	return out, nil
}

func runWrapper(cxx bool, args []string) error {
	// A response file that is missing is a mistake in the command line, to
	// report as such before the toolchain is looked for.
	for _, a := range args {
		if name, ok := strings.CutPrefix(a, "@"); ok && name != "" {
			if _, err := os.Stat(name); errors.Is(err, os.ErrNotExist) {
				return withExit(exitUsage, fmt.Errorf("response file %s: does not exist", name))
			}
		}
	}
	host := toolchain.SystemHost()
	layout, err := mnemeLayout(host)
	if err != nil {
		return withExit(exitFailure, err)
	}
	tmp, err := os.MkdirTemp("", "mneme-cc-")
	if err != nil {
		return withExit(exitFailure, fmt.Errorf("creating a temporary directory: %w", err))
	}
	if os.Getenv("MNEME_KEEP_TEMPS") == "" {
		defer os.RemoveAll(tmp)
	}
	plan, err := toolchain.NewWrapper(host, cxx, layout, tmp).Plan(args)
	if err != nil {
		return withExit(exitUsage, err)
	}
	err = toolchain.Execute(plan, os.Stdin, os.Stdout, os.Stderr, os.Getenv("MNEME_VERBOSE") != "")
	var se *toolchain.StepError
	if errors.As(err, &se) {
		return withExit(se.ExitCode, err)
	}
	return withExit(exitFailure, err)
}

// mnemeLayout is the install prefix this mneme binary belongs to.
func mnemeLayout(host toolchain.Host) (toolchain.Layout, error) {
	exe, err := os.Executable()
	if err != nil {
		return toolchain.Layout{}, fmt.Errorf("locating the mneme executable: %w", err)
	}
	return toolchain.PrefixFromExecutable(host, exe)
}
