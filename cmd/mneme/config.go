package main

import (
	"fmt"
	"strings"

	"github.com/mneme-gpu/mneme/toolchain"
	"github.com/spf13/cobra"
)

// configKeys are the values `mneme config` prints, one line each, in help order.
var configKeys = []struct{ name, help string }{
	{"cc", "the C compiler wrapper (CMAKE_C_COMPILER, CC)"},
	{"cxx", "the C++/CUDA compiler wrapper (CMAKE_CXX_COMPILER, CMAKE_CUDA_COMPILER, CXX)"},
	{"cmakedir", "the directory of mnemeConfig.cmake (mneme_DIR)"},
	{"prefix", "mneme's install prefix"},
	{"cflags", "clang flags of a recordable CUDA compile (the wrapper adds them itself)"},
	{"ldflags", "flags of a recordable link (the wrapper adds them itself)"},
	{"llvmdir", "the LLVM installation of the clang the wrappers use"},
	{"arch", "the GPU architecture CUDA sources are compiled for"},
}

var configCmd = &cobra.Command{
	Use:       "config KEY",
	Short:     "Print build-integration values: cc, cxx, cmakedir, prefix, cflags, ldflags, llvmdir, arch",
	Long:      "Print one build-integration value on one line. Keys:\n" + configKeyHelp(),
	Example:   "  cmake -DCMAKE_CUDA_COMPILER=$(mneme config cxx) -Dmneme_DIR=$(mneme config cmakedir) ..\n  make CXX=$(mneme config cxx)",
	Args:      cobra.ExactArgs(1),
	ValidArgs: configKeyNames(),
	RunE: func(cmd *cobra.Command, args []string) error {
		v, err := configValue(toolchain.SystemHost(), args[0])
		if err != nil {
			return err
		}
		fmt.Fprintln(cmd.OutOrStdout(), v)
		return nil
	},
}

func init() { rootCmd.AddCommand(configCmd) }

func configKeyNames() []string {
	var names []string
	for _, k := range configKeys {
		names = append(names, k.name)
	}
	return names
}

func configKeyHelp() string {
	var b strings.Builder
	for _, k := range configKeys {
		fmt.Fprintf(&b, "  %-9s %s\n", k.name, k.help)
	}
	return b.String()
}

func configValue(host toolchain.Host, key string) (string, error) {
	layout, err := mnemeLayout(host)
	if err != nil {
		return "", withExit(exitFailure, err)
	}
	switch key {
	case "cc":
		return layout.CCWrapper(), nil
	case "cxx":
		return layout.CXXWrapper(), nil
	case "cmakedir":
		return layout.CMakeDir(), nil
	case "prefix":
		return layout.Prefix, nil
	case "arch":
		return toolchain.GPUArch(host, nil), nil
	case "llvmdir":
		clang, err := toolchain.FindClang(host, true)
		if err != nil {
			return "", withExit(exitFailure, err)
		}
		return toolchain.LLVMDir(clang), nil
	case "cflags", "ldflags":
		cuda, err := toolchain.FindCUDA(host)
		if err != nil {
			return "", withExit(exitFailure, err)
		}
		if key == "cflags" {
			return shellJoin(toolchain.CompileFlags(host, cuda, toolchain.GPUArch(host, nil))), nil
		}
		return shellJoin(toolchain.LinkFlags(host, layout, cuda)), nil
	}
	return "", withExit(exitUsage, fmt.Errorf("unknown config key %q: want one of %s", key, strings.Join(configKeyNames(), ", ")))
}

// shellJoin joins flags for a shell command line, quoting those that need it.
func shellJoin(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`*?[]{}()<>|&;#~") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		quoted[i] = a
	}
	return strings.Join(quoted, " ")
}
