package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// EnvCPUProfile names a file for a CPU profile of the runtime library
// while it records (go tool pprof reads it): where a recording's CPU time
// goes, measured on the machine that runs the application.
const EnvCPUProfile = "MNEME_CPUPROFILE"

var profileFile *os.File

// startProfile starts the CPU profile MNEME_CPUPROFILE asks for; a profile
// that cannot be written is reported and recording goes on without it.
func startProfile() {
	path := os.Getenv(EnvCPUProfile)
	if path == "" {
		return
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "mneme record: %s: %v\n", EnvCPUProfile, err)
		return
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintf(os.Stderr, "mneme record: %s=%s: %v\n", EnvCPUProfile, path, err)
		f.Close()
		return
	}
	profileFile = f
}

// stopProfile completes the profile once the last snapshot is written.
func stopProfile() {
	if profileFile == nil {
		return
	}
	pprof.StopCPUProfile()
	if err := profileFile.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "mneme record: %s: %v\n", EnvCPUProfile, err)
	}
	profileFile = nil
}
