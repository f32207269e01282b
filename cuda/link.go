package cuda

/*
#include <stdlib.h>
#include "driver.h"
*/
import "C"

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unsafe"
)

// JITOptions are the ptxas settings of the driver's JIT linker.
type JITOptions struct {
	OptLevel     int    // 0-4; -1 = the driver's default (4)
	MaxRegisters int    // registers per thread cap; 0 = none
	Arch         string // target such as "sm_90" or "sm_90a"; empty = the current context's device
}

// LinkResult is the outcome of linking PTX into a cubin.
type LinkResult struct {
	Cubin    []byte
	InfoLog  string        // the JIT's verbose log: "used N registers, ... bytes lmem" per function
	WallTime time.Duration // measured around the whole link
	Options  []string      // the options in ptxas's spelling, e.g. "-O3", "--maxrregcount=64"
}

// Stats returns ptxas's resource report for the named kernel from the info
// log, or for the first function reported when name is empty.
func (r *LinkResult) Stats(name string) (PtxasStats, bool) {
	for _, s := range ParsePtxasInfo(r.InfoLog) {
		if name == "" || s.Function == name {
			return s, true
		}
	}
	return PtxasStats{}, false
}

// LinkError is a failed link; Log holds the JIT's error log.
type LinkError struct {
	Err error
	Log string
}

func (e *LinkError) Error() string {
	if e.Log == "" {
		return e.Err.Error()
	}
	return e.Err.Error() + "\n" + e.Log
}

func (e *LinkError) Unwrap() error { return e.Err }

// jitLogBytes bounds each JIT log; ptxas's verbose output for one kernel is
// a few hundred bytes, for large modules a few kilobytes.
const jitLogBytes = 64 << 10

// ParseArch reads a target name "sm_XY" or "sm_XYa" (also "compute_XY")
// into the driver's CUjit_target value.
func ParseArch(arch string) (int, error) {
	s := strings.TrimSpace(arch)
	switch {
	case strings.HasPrefix(s, "sm_"):
		s = s[3:]
	case strings.HasPrefix(s, "compute_"):
		s = s[8:]
	default:
		return 0, fmt.Errorf("arch %q: want sm_XY, e.g. sm_90", arch)
	}
	accelerated := strings.HasSuffix(s, "a")
	s = strings.TrimSuffix(s, "a")
	n, err := strconv.Atoi(s)
	if err != nil || n < 30 || n > 1299 || len(s) < 2 {
		return 0, fmt.Errorf("arch %q: want sm_XY with a compute capability such as 90", arch)
	}
	if accelerated {
		n += 0x10000 // CU_COMPUTE_ACCELERATED_TARGET
	}
	return n, nil
}

func (o JITOptions) validate() (target int, human []string, err error) {
	if o.OptLevel < -1 || o.OptLevel > 4 {
		return 0, nil, fmt.Errorf("JIT option OptLevel %d: want 0..4, or -1 for the default", o.OptLevel)
	}
	if o.MaxRegisters < 0 || o.MaxRegisters > 255 {
		return 0, nil, fmt.Errorf("JIT option MaxRegisters %d: want 0 (no cap) or 1..255", o.MaxRegisters)
	}
	level := o.OptLevel
	if level < 0 {
		level = 4
	}
	human = append(human, fmt.Sprintf("-O%d", level))
	if o.MaxRegisters > 0 {
		human = append(human, fmt.Sprintf("--maxrregcount=%d", o.MaxRegisters))
	}
	if o.Arch != "" {
		if target, err = ParseArch(o.Arch); err != nil {
			return 0, nil, fmt.Errorf("JIT option Arch: %w", err)
		}
		human = append(human, "--gpu-name="+strings.TrimSpace(o.Arch))
	}
	return target, human, nil
}

// LinkPTX compiles PTX to a cubin with the driver's JIT linker (cuLinkCreate,
// cuLinkAddData, cuLinkComplete) with verbose ptxas output. It needs a
// current context. A failure is a *LinkError carrying the JIT's error log.
func LinkPTX(ptx []byte, name string, opts JITOptions) (*LinkResult, error) {
	target, human, err := opts.validate()
	if err != nil {
		return nil, err
	}
	if err := Init(); err != nil {
		return nil, err
	}
	if len(ptx) == 0 {
		return nil, fmt.Errorf("LinkPTX %s: empty PTX", name)
	}
	src := cBytes(ptx)
	defer C.free(src)
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	info := C.calloc(jitLogBytes, 1)
	defer C.free(info)
	elog := C.calloc(jitLogBytes, 1)
	defer C.free(elog)

	args := C.mn_link_args{
		opt_level:     C.int(opts.OptLevel),
		max_registers: C.int(opts.MaxRegisters),
		target:        C.int(target),
		info_log:      (*C.char)(info),
		error_log:     (*C.char)(elog),
		log_size:      jitLogBytes,
	}
	start := time.Now()
	r := C.mn_link_ptx((*C.char)(src), C.size_t(len(ptx)+1), cname, &args)
	wall := time.Since(start)
	infoLog := strings.TrimSpace(C.GoString((*C.char)(info)))
	if r != 0 {
		call := "cuLinkCreate_v2"
		if args.failed_call != nil {
			call = C.GoString(args.failed_call)
		}
		errLog := strings.TrimSpace(C.GoString((*C.char)(elog)))
		if errLog == "" {
			errLog = infoLog
		}
		return nil, &LinkError{Err: fmt.Errorf("linking PTX %q: %w", name, check(call, r)), Log: errLog}
	}
	defer C.free(args.cubin)
	return &LinkResult{
		Cubin:    C.GoBytes(args.cubin, C.int(args.cubin_size)),
		InfoLog:  infoLog,
		WallTime: wall,
		Options:  human,
	}, nil
}

// PtxasStats is ptxas's resource report for one function.
type PtxasStats struct {
	Function    string
	Registers   int
	StackFrame  int // bytes
	SpillStores int // bytes (reported by ptxas's own section only)
	SpillLoads  int // bytes (reported by ptxas's own section only)
	SharedBytes int // static shared memory (smem)
	ConstBytes  int // constant bank 0 (cmem[0]): parameters and driver data
	LocalBytes  int // local memory per thread (lmem): stack and spills
}

// The JIT's info log has come in two spellings: ptxas's own
//
//	ptxas info    : Function properties for saxpy
//	    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
//	ptxas info    : Used 10 registers, 384 bytes cmem[0]
//
// and the linker's (the only one CUDA 13's driver JIT writes):
//
//	info    : Function properties for 'saxpy':
//	info    : used 10 registers, used 0 barriers, 0 stack, 0 bytes smem, 552 bytes cmem[0], 0 bytes lmem
var (
	reEntry   = regexp.MustCompile(`(?:Compiling entry function|Function properties for)\s+'?([^'\s:]+)`)
	reRegs    = regexp.MustCompile(`(?i)\bused (\d+) registers`)
	reStack   = regexp.MustCompile(`(\d+) (?:bytes )?stack\b`)
	reSpillSt = regexp.MustCompile(`(\d+) bytes spill stores`)
	reSpillLd = regexp.MustCompile(`(\d+) bytes spill loads`)
	reSmem    = regexp.MustCompile(`(\d+) bytes smem`)
	reCmem0   = regexp.MustCompile(`(\d+) bytes cmem\[0\]`)
	reLmem    = regexp.MustCompile(`(\d+) bytes lmem`)
)

// ParsePtxasInfo reads the per-function resource lines of the JIT's info
// log, in the order functions first appear; a function reported by both
// ptxas and the linker gets one entry. Lines it does not recognise are skipped.
func ParsePtxasInfo(log string) []PtxasStats {
	var out []PtxasStats
	index := map[string]int{}
	cur := -1
	num := func(re *regexp.Regexp, line string, dst *int) {
		if m := re.FindStringSubmatch(line); m != nil {
			if v, err := strconv.Atoi(m[1]); err == nil {
				*dst = v
			}
		}
	}
	for _, line := range strings.Split(log, "\n") {
		if m := reEntry.FindStringSubmatch(line); m != nil {
			i, ok := index[m[1]]
			if !ok {
				i = len(out)
				index[m[1]] = i
				out = append(out, PtxasStats{Function: m[1]})
			}
			cur = i
			continue
		}
		if cur < 0 {
			continue
		}
		s := &out[cur]
		num(reRegs, line, &s.Registers)
		num(reStack, line, &s.StackFrame)
		num(reSpillSt, line, &s.SpillStores)
		num(reSpillLd, line, &s.SpillLoads)
		num(reSmem, line, &s.SharedBytes)
		num(reCmem0, line, &s.ConstBytes)
		num(reLmem, line, &s.LocalBytes)
	}
	return out
}
