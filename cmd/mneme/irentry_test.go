package main

import (
	"fmt"
	"os"

	"github.com/mneme-gpu/mneme/appabi"
)

// writeIREntry is `mneme-irentry NAME IN.bc OUT`: it encodes one embedded-IR
// entry the way the compiler wrapper does, so scripts can build objects with
// a mneme_ir section using only binutils.
func writeIREntry(args []string) int {
	if len(args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: mneme-irentry NAME IN.bc OUT")
		return 2
	}
	bc, err := os.ReadFile(args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := os.WriteFile(args[2], appabi.EncodeIREntry(appabi.IREntry{Name: args[0], Bitcode: bc}), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
