package cuda

/*
#include <stdlib.h>
#include "nvjitlink.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// The toolkit's ptxas, as the library libnvJitLink. Measured on an H100 with
// CUDA 13.0: the same PTX compiled by the driver's JIT ran a tiled matrix
// multiply 26% slower than the cubin the application's build got from the
// toolkit's ptxas, so replay compiles with the toolkit's when it can.

var (
	toolkitOnce    sync.Once
	toolkitVersion string
	toolkitErr     error
	toolkitMu      sync.Mutex
)

// EnvNVJitLink names libnvJitLink explicitly; otherwise it is looked for in
// $CUDA_PATH, /usr/local/cuda and on the library path.
const EnvNVJitLink = "MNEME_NVJITLINK"

func nvJitLinkCandidates() []string {
	if p := os.Getenv(EnvNVJitLink); p != "" {
		return []string{p}
	}
	var out []string
	for _, root := range []string{os.Getenv("CUDA_PATH"), os.Getenv("CUDA_HOME"), "/usr/local/cuda"} {
		if root == "" {
			continue
		}
		for _, lib := range []string{"lib64", "lib"} {
			matches, _ := filepath.Glob(filepath.Join(root, lib, "libnvJitLink.so*"))
			out = append(out, matches...)
		}
	}
	return append(out, "libnvJitLink.so.13", "libnvJitLink.so")
}

// ToolkitPTXAS loads libnvJitLink once and reports its version ("13.0").
func ToolkitPTXAS() (string, error) {
	toolkitOnce.Do(func() {
		tried := nvJitLinkCandidates()
		for _, p := range tried {
			cp := C.CString(p)
			ok := C.mn_njl_open(cp) != 0
			C.free(unsafe.Pointer(cp))
			if ok {
				var major, minor C.uint
				if C.mn_njl_version(&major, &minor) == 0 {
					toolkitVersion = fmt.Sprintf("%d.%d", major, minor)
				}
				return
			}
		}
		toolkitErr = fmt.Errorf("no CUDA toolkit JIT linker (libnvJitLink) found (tried %s; set %s)", strings.Join(tried, ", "), EnvNVJitLink)
	})
	return toolkitVersion, toolkitErr
}

// toolkitTarget checks opts for the toolkit's ptxas (program or library)
// and returns the target and the -O level to pass: 3, what clang passes
// for an optimized build, unless opts says otherwise. who names the
// assembler in the error.
func (opts JITOptions) toolkitTarget(who string) (arch string, level int, err error) {
	if _, _, err := opts.validate(); err != nil {
		return "", 0, err
	}
	arch = strings.TrimSpace(opts.Arch)
	if arch == "" {
		return "", 0, errors.New(who + ": a target architecture is required")
	}
	level = 3
	if opts.OptLevel >= 0 {
		level = min(opts.OptLevel, 3)
	}
	return arch, level, nil
}

// ToolkitLinkPTX compiles PTX to a cubin with the toolkit's ptxas through
// libnvJitLink, with the options the application's compiler gives ptxas
// (-O3 unless opts says otherwise). It needs no GPU. opts.Arch is required.
func ToolkitLinkPTX(ptx []byte, name string, opts JITOptions) (*LinkResult, error) {
	if _, err := ToolkitPTXAS(); err != nil {
		return nil, err
	}
	arch, level, err := opts.toolkitTarget("toolkit ptxas")
	if err != nil {
		return nil, err
	}
	// nvJitLink's own -O takes only 0 and 3; other ptxas levels go through -Xptxas.
	options := []string{"-arch=" + arch, "-verbose"}
	if level != 3 {
		options = append(options, fmt.Sprintf("-Xptxas=-O%d", level))
	}
	if opts.MaxRegisters > 0 {
		options = append(options, fmt.Sprintf("-maxrregcount=%d", opts.MaxRegisters))
	}
	if len(ptx) == 0 {
		return nil, fmt.Errorf("ToolkitLinkPTX %s: empty PTX", name)
	}
	copts := make([]*C.char, len(options))
	for i, o := range options {
		copts[i] = C.CString(o)
		defer C.free(unsafe.Pointer(copts[i]))
	}
	src := cBytes(ptx)
	defer C.free(src)
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var res C.mn_njl_result
	// One link at a time: the library's thread safety is not documented for
	// every version, and ptxas itself is single-threaded per link anyway.
	toolkitMu.Lock()
	start := time.Now()
	r := C.mn_njl_link_ptx((*C.char)(src), C.size_t(len(ptx)+1), cname, (**C.char)(unsafe.Pointer(&copts[0])), C.uint(len(copts)), &res)
	wall := time.Since(start)
	toolkitMu.Unlock()
	defer C.free(unsafe.Pointer(res.info_log))
	defer C.free(unsafe.Pointer(res.error_log))
	infoLog := strings.TrimSpace(C.GoString(res.info_log))
	if r != 0 {
		errLog := strings.TrimSpace(C.GoString(res.error_log))
		if errLog == "" {
			errLog = infoLog
		}
		return nil, &LinkError{Err: fmt.Errorf("toolkit ptxas on %q: %s failed (nvJitLinkResult %d)", name, C.GoString(res.failed_call), int(r)), Log: errLog}
	}
	defer C.free(res.cubin)
	human := []string{"toolkit-ptxas"}
	for _, o := range options {
		if o != "-verbose" {
			human = append(human, o)
		}
	}
	return &LinkResult{Cubin: C.GoBytes(res.cubin, C.int(res.cubin_size)), InfoLog: infoLog, WallTime: wall, Options: human}, nil
}
