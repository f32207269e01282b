// Package record is the recorder that runs inside a CUDA application started
// by `mneme record`. The C shim hands every launch, allocation and free to the
// runtime library (cmd/mneme-rt), which forwards them here: allocations are
// served from a fixed-address arena, and each selected launch is snapshotted
// before and after it runs and written to the recording database.
//
// The package is plain Go over the Process interface (what the recorder needs
// from the application and its GPU) and arena.Backend, so its logic is
// tested without a GPU; cmd/mneme-rt adapts both to the real CUDA calls.
package record

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/mneme-gpu/mneme/record/arena"
)

// Environment variables through which `mneme record` configures the runtime
// library inside the application.
const (
	EnvRecord        = "MNEME_RECORD"         // set to 1 to record
	EnvDB            = "MNEME_RDB"            // database directory
	EnvVASS          = "MNEME_VASS"           // arena size in GiB
	EnvVABase        = "MNEME_VA_BASE"        // arena base address (hex)
	EnvKernels       = "MNEME_KERNELS"        // regular expression on kernel names
	EnvMaxRecordings = "MNEME_MAX_RECORDINGS" // instances per kernel, 0 = no cap
	EnvSkip          = "MNEME_SKIP"           // matching launches to skip first
	EnvRank          = "MNEME_RANK"           // the MPI rank `mneme record` found, recorded with each kernel
	EnvCompress      = "MNEME_SNAPSHOT_ZSTD"  // 0: store snapshots raw (default 1: zstd)
	EnvRuntimeLib    = "MNEME_RT_LIB"         // path of libmneme_rt.so
	EnvFullCopies    = "MNEME_FULL_COPIES"    // 1: copy every allocation whole (no fingerprints, no staging)
	EnvBackground    = "MNEME_BACKGROUND"     // 0: write every snapshot before the application goes on
	EnvShadow        = "MNEME_SHADOW"         // where background snapshots are copied: auto, host or device
	EnvInjectLib     = "MNEME_INJECT_LIB"     // path of libmneme_inject.so, for applications not built with the wrapper
	EnvRecordTuned   = "MNEME_RECORD_TUNED"   // 1: launches not recorded run tuned kernels (mneme record --with-tuned-kernels)
)

// Where the copies of snapshots written in the background are made
// (Config.Shadow, MNEME_SHADOW).
const (
	ShadowAuto   = "auto"   // device memory when it can spare them, else host memory
	ShadowHost   = "host"   // host memory only
	ShadowDevice = "device" // device memory only, kept there until written
)

// VASSAuto is the default arena size (the -vass default): as large as the
// GPU's memory. A reservation is only address space, so sizing it for the
// whole device costs no memory and lets any application that fits on the GPU
// be recorded.
const VASSAuto = "auto"

// StatusFileName is the file (JSON) in the database directory through which
// the runtime tells `mneme record` what happened. It must not end in .json,
// which would make it look like a kernel file to db.Open.
const StatusFileName = ".mneme-record.status"

// Config is what one recording run was asked to do.
type Config struct {
	DB            string         // database directory
	VABase        uint64         // arena base address
	VABaseChosen  bool           // VABase was set (MNEME_VA_BASE): no other base is tried
	VASize        uint64         // arena size in bytes; 0 means the GPU's memory (VASSAuto)
	Kernels       *regexp.Regexp // selects kernels by mangled or demangled name; nil selects all
	MaxRecordings int            // distinct instances per kernel; 0 means no cap
	Skip          int            // matching launches to let pass before recording
	Compress      bool           // zstd-compress snapshot chunks where it pays
	FullCopies    bool           // copy allocations whole even where the process can fingerprint and stage
	NoBackground  bool           // write snapshots at once, never from shadow copies in the background
	Shadow        string         // ShadowAuto (""), ShadowHost or ShadowDevice
	Rank          *int           // the process's MPI rank; nil outside a job
	Log           io.Writer      // where errors are reported as they happen (the application's stderr)
}

// ParseVASS reads an arena size in GiB ("4", "0.5") as bytes; "auto" (or
// nothing) is 0, the GPU's memory.
func ParseVASS(s string) (uint64, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == VASSAuto {
		return 0, nil
	}
	g, err := strconv.ParseFloat(s, 64)
	n := uint64(g * (1 << 30))
	if err != nil || !(g > 0) || g > 1<<20 || n == 0 {
		return 0, fmt.Errorf("-vass %q: want auto or a positive size in GiB (for example 4 or 0.5)", s)
	}
	return n, nil
}

// ConfigFromEnv reads the configuration `mneme record` put in the
// environment. Every error names the variable.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{VABase: arena.DefaultBase, Log: os.Stderr}
	c.DB = getenv(EnvDB)
	if c.DB == "" {
		return c, fmt.Errorf("%s is not set: run the application under `mneme record`", EnvDB)
	}
	if v := getenv(EnvVASS); v != "" {
		n, err := ParseVASS(v)
		if err != nil {
			return c, fmt.Errorf("%s: %w", EnvVASS, err)
		}
		c.VASize = n
	}
	if v := getenv(EnvVABase); v != "" {
		n, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimPrefix(v, "0x"), "0X"), 16, 64)
		if err != nil || n == 0 {
			return c, fmt.Errorf("%s %q: want a hex device address such as 0x153940000000", EnvVABase, v)
		}
		c.VABase, c.VABaseChosen = n, true
	}
	if v := getenv(EnvKernels); v != "" {
		re, err := regexp.Compile(v)
		if err != nil {
			return c, fmt.Errorf("%s (--kernels) %q: %v", EnvKernels, v, err)
		}
		c.Kernels = re
	}
	if v := getenv(EnvRank); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return c, fmt.Errorf("%s %q: want a non-negative rank", EnvRank, v)
		}
		c.Rank = &n
	}
	var err error
	if c.MaxRecordings, err = nonNegative(getenv, EnvMaxRecordings, "--max-recordings"); err != nil {
		return c, err
	}
	if c.Skip, err = nonNegative(getenv, EnvSkip, "--skip"); err != nil {
		return c, err
	}
	// zstd by default: measured on an H200 machine (16 cores), the 2D
	// stencil's snapshots were written at 13.8 GiB/s of device data instead
	// of 2.1 GiB/s and 560x smaller; random floats (which zstd leaves
	// almost as they are) at 1.57 GB/s instead of 1.67 GB/s.
	var background bool
	for _, sw := range []struct {
		name string
		def  bool
		dst  *bool
	}{{EnvCompress, true, &c.Compress}, {EnvFullCopies, false, &c.FullCopies}, {EnvBackground, true, &background}} {
		if *sw.dst, err = switchEnv(getenv, sw.name, sw.def); err != nil {
			return c, err
		}
	}
	c.NoBackground = !background
	switch v := getenv(EnvShadow); v {
	case "", ShadowAuto, ShadowHost, ShadowDevice:
		c.Shadow = v
	default:
		return c, fmt.Errorf("%s %q: want %s, %s or %s", EnvShadow, v, ShadowAuto, ShadowHost, ShadowDevice)
	}
	return c, nil
}

// switchEnv reads a 0/1 variable; unset is def.
func switchEnv(getenv func(string) string, name string, def bool) (bool, error) {
	switch v := getenv(name); v {
	case "":
		return def, nil
	case "0", "1":
		return v == "1", nil
	default:
		return false, fmt.Errorf("%s %q: want 0 or 1", name, v)
	}
}

func nonNegative(getenv func(string) string, name, flag string) (int, error) {
	v := getenv(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s (%s) %q: want a non-negative integer", name, flag, v)
	}
	return n, nil
}

// Selects reports whether a kernel is to be recorded.
func (c Config) Selects(mangled, demangled string) bool {
	return c.Kernels == nil || c.Kernels.MatchString(mangled) || c.Kernels.MatchString(demangled)
}
