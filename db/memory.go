package db

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// HostMemoryBudget is how many bytes this process can still allocate: the
// smallest of the memory the system has available, what the process's
// memory cgroup (v2) leaves below its limit, and what the address-space
// limit (ulimit -v) leaves beside the process's current size, with a
// quarter kept back for the runtime and for the work that follows.
func HostMemoryBudget() uint64 {
	budget := ^uint64(0)
	if avail, ok := procValue("/proc/meminfo", "MemAvailable:"); ok {
		budget = avail
	}
	if left, ok := cgroupMemoryLeft("/sys/fs/cgroup"); ok {
		budget = min(budget, left)
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &lim); err == nil && lim.Cur != ^uint64(0) {
		used, _ := procValue("/proc/self/status", "VmSize:")
		left := uint64(0)
		if lim.Cur > used {
			left = lim.Cur - used
		}
		budget = min(budget, left)
	}
	return budget / 4 * 3
}

// cgroupMemoryLeft is memory.max less memory.current of the cgroup v2
// hierarchy mounted at root, when a limit is set ("max" is none).
func cgroupMemoryLeft(root string) (uint64, bool) {
	limit, err := os.ReadFile(filepath.Join(root, "memory.max"))
	if err != nil {
		return 0, false
	}
	max, err := strconv.ParseUint(string(bytes.TrimSpace(limit)), 10, 64)
	if err != nil {
		return 0, false // "max": no limit
	}
	cur, err := os.ReadFile(filepath.Join(root, "memory.current"))
	if err != nil {
		return 0, false
	}
	used, err := strconv.ParseUint(string(bytes.TrimSpace(cur)), 10, 64)
	if err != nil {
		return 0, false
	}
	if used >= max {
		return 0, true
	}
	return max - used, true
}

// procValue reads a "Key: N kB" line of a /proc file, in bytes.
func procValue(path, key string) (uint64, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		rest, ok := bytes.CutPrefix(sc.Bytes(), []byte(key))
		if !ok {
			continue
		}
		fields := bytes.Fields(rest)
		if len(fields) == 0 {
			return 0, false
		}
		n, err := strconv.ParseUint(string(fields[0]), 10, 64)
		if err != nil {
			return 0, false
		}
		if len(fields) > 1 && string(fields[1]) == "kB" {
			n <<= 10
		}
		return n, true
	}
	return 0, false
}
