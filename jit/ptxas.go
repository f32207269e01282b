package jit

import (
	"regexp"
	"strconv"
)

// ptxas's verbose info log, as the driver JIT returns it, e.g.
//
//	ptxas info    : Function properties for _Z6vecaddPfS_S_i
//	    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
//	ptxas info    : Used 12 registers, used 0 barriers, 380 bytes cmem[0]
var (
	reRegisters = regexp.MustCompile(`Used (\d+) registers`)
	reSpills    = regexp.MustCompile(`(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads`)
	reCmem      = regexp.MustCompile(`(\d+) bytes cmem\[\d+\]`)
	reSmem      = regexp.MustCompile(`(\d+) bytes smem`)
	reLmem      = regexp.MustCompile(`(\d+) bytes lmem`)
)

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// parsePtxasInfo fills the resource usage that ptxas reported.
func parsePtxasInfo(log string, out *Output) {
	if m := reRegisters.FindStringSubmatch(log); m != nil {
		out.Registers = atoi(m[1])
	}
	if m := reSpills.FindStringSubmatch(log); m != nil {
		out.StackBytes, out.SpillStores, out.SpillLoads = atoi(m[1]), atoi(m[2]), atoi(m[3])
	}
	out.ConstBytes = 0
	for _, m := range reCmem.FindAllStringSubmatch(log, -1) {
		out.ConstBytes += atoi(m[1])
	}
	if m := reSmem.FindStringSubmatch(log); m != nil {
		out.SharedBytes = atoi(m[1])
	}
	if m := reLmem.FindStringSubmatch(log); m != nil {
		out.LocalBytes = atoi(m[1])
	}
}
