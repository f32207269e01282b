package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/mneme-gpu/mneme/cuda"
	"github.com/mneme-gpu/mneme/llvm"
)

// version is set at link time for releases (-X main.version=...).
var version = "0.1.0-dev"

// mnemeVersion is the version recorded in databases and printed by `mneme version`.
func mnemeVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return version
}

func init() {
	rootCmd.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the versions of mneme, its LLVM and the CUDA driver",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "mneme %s\nLLVM %s\n", mnemeVersion(), llvm.Version())
			if err := cuda.Init(); err != nil {
				fmt.Fprintf(out, "CUDA driver: none (%v)\n", err)
				return nil
			}
			v, err := cuda.DriverVersion()
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "CUDA driver API %d.%d\n", v/1000, v%1000/10)
			return nil
		},
	})
}
