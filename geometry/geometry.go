// Package geometry decides whether a kernel depends on its launch geometry:
// whether replaying it with another block shape (and the grid recomputed to
// cover the same threads) may compute something else or fault. The facts come
// from an analysis of the kernel's IR (package llvm); the decision is plain
// Go, so the tuner can make it without cgo.
package geometry

import (
	"fmt"
	"strings"

	"github.com/mneme-gpu/mneme"
)

// Facts are what the IR says about a kernel's use of its launch geometry.
type Facts struct {
	// NonCanonicalDimUses describe reads of blockDim or gridDim (the NVVM
	// ntid and nctaid registers) used other than in the global index
	// blockIdx*blockDim+threadIdx or the grid stride blockDim*gridDim,
	// e.g. "ntid.x in lshr" for a tree reduction's first stride.
	NonCanonicalDimUses []string `json:"non_canonical_dim_uses,omitempty"`
	// ThreadIDDims tells which of threadIdx.x, .y and .z the kernel reads.
	ThreadIDDims [3]bool `json:"thread_id_dims"`
	// SharedArrays are the kernel's shared-memory arrays.
	SharedArrays []SharedArray `json:"shared_arrays,omitempty"`
	// Opaque names code the analysis cannot see into (inline assembly,
	// calls of functions without a body): it may read the geometry.
	Opaque []string `json:"opaque,omitempty"`
	// GlobalIndexAccess is true when the kernel reads or writes memory
	// outside shared memory at addresses computed from its global thread
	// index (blockIdx and threadIdx together).
	GlobalIndexAccess bool `json:"global_index_access,omitempty"`
	// IndexBounded is true when the kernel bounds its global index from
	// above somewhere (i < n, a grid-stride loop's test, min(i, n - 1)).
	IndexBounded bool `json:"index_bounded,omitempty"`
	// MaxThreads is the kernel's own launch bound (__launch_bounds__(N),
	// .maxntid): a block of more threads cannot launch. 0 when it has none.
	MaxThreads int `json:"max_threads,omitempty"`
}

// UnguardedIndex reports whether the kernel indexes memory by its global
// thread index without ever bounding it: every thread of a launch touches
// its element, so the launch must cover exactly the threads it was written
// for.
func (f Facts) UnguardedIndex() bool { return f.GlobalIndexAccess && !f.IndexBounded }

// SharedArray is one __shared__ array (an addrspace(3) global).
type SharedArray struct {
	Name  string `json:"name"`
	Bytes uint64 `json:"bytes"` // 0 for a dynamic one
	// Dynamic marks an extern __shared__ array, sized at launch by the
	// recorded shared-memory size (which tuning keeps).
	Dynamic bool `json:"dynamic,omitempty"`
	// IndexedByThreadID is true when an address into the array is computed
	// from threadIdx: its size is then tied to a block shape.
	IndexedByThreadID bool `json:"indexed_by_thread_id"`
}

// Decision is whether a kernel's results may change with its block shape,
// and why.
type Decision struct {
	Dependent bool     `json:"dependent"`
	Reasons   []string `json:"reasons"`
	// Probed is set when a replay with another block shape was tried;
	// ProbeBlock is that shape and ProbeStatus its outcome.
	Probed      bool         `json:"probed,omitempty"`
	ProbeBlock  mneme.Dim3   `json:"probe_block,omitempty"`
	ProbeStatus mneme.Status `json:"probe_status,omitempty"`
	// ExactCover is set for a kernel with an unguarded global index
	// (Facts.UnguardedIndex): another block shape is safe only when the
	// launch still covers exactly the recorded threads in every dimension,
	// i.e. the block divides them. ExactCoverRule says so in one line.
	ExactCover     bool   `json:"exact_cover,omitempty"`
	ExactCoverRule string `json:"exact_cover_rule,omitempty"`
	// MaxThreads is the kernel's own launch bound (Facts.MaxThreads): no
	// block of more threads is tried, since none can launch. 0: none.
	MaxThreads int `json:"max_threads,omitempty"`
}

// LaunchBoundRule says, for the log and the summary, how a kernel's own
// launch bound limits the blocks searched.
func LaunchBoundRule(maxThreads int) string {
	return fmt.Sprintf("blocks of at most %d threads (the kernel's own __launch_bounds__: a larger block cannot launch)", maxThreads)
}

// ExactCoverRuleText is the rule an unguarded global index imposes, as the
// decision, the log and the summary state it.
const ExactCoverRuleText = "the kernel indexes memory by its global thread index and never bounds it (no i < n), so a block must divide the recorded threads in each dimension: a launch that covers more runs its last block past the data"

// CoversExactly reports whether a launch with grid and block runs exactly
// the threads of the recorded launch in each dimension.
func CoversExactly(grid, block, recGrid, recBlock mneme.Dim3) bool {
	n := func(g, b uint32) uint64 { return uint64(max(g, 1)) * uint64(max(b, 1)) }
	return n(grid.X, block.X) == n(recGrid.X, recBlock.X) &&
		n(grid.Y, block.Y) == n(recGrid.Y, recBlock.Y) &&
		n(grid.Z, block.Z) == n(recGrid.Z, recBlock.Z)
}

func (d Decision) String() string {
	word := "geometry-agnostic"
	if d.Dependent {
		word = "geometry-dependent"
	}
	return word + ": " + strings.Join(d.Reasons, "; ")
}

// Unknown is the decision when the IR could not be analysed: dependent,
// since nothing shows that another block shape is safe.
func Unknown(why string) Decision {
	return Decision{Dependent: true, Reasons: []string{"the IR could not be analysed (" + why + ")"}}
}

// Decide applies the rules (conservatively: anything the facts cannot rule
// out counts as dependent):
//   - blockDim or gridDim used outside the global-index and grid-stride
//     patterns (sizes, strides, bounds tied to the block);
//   - a shared array indexed by threadIdx (sized for a fixed block: a static
//     one by its type, a dynamic one by the recorded shared-memory size);
//   - threadIdx.y or .z read while the recorded block is 2D or 3D (the
//     kernel maps threads onto a tile of that shape);
//   - code the analysis cannot see into.
//
// Apart from dependence, a kernel that indexes memory by its global thread
// index without bounding it gets ExactCover: blocks are limited to those that
// divide the recorded threads.
//
// recordedBlock is the block shape of the recorded launch.
func Decide(f Facts, recordedBlock mneme.Dim3) Decision {
	d := Decision{MaxThreads: max(f.MaxThreads, 0)}
	if len(f.NonCanonicalDimUses) > 0 {
		d.Reasons = append(d.Reasons, "blockDim/gridDim used outside the global-index and grid-stride patterns ("+strings.Join(f.NonCanonicalDimUses, ", ")+")")
	}
	for _, a := range f.SharedArrays {
		switch {
		case a.IndexedByThreadID && a.Dynamic:
			d.Reasons = append(d.Reasons, fmt.Sprintf("dynamic shared array %s, sized by the recorded shared memory, is indexed by threadIdx", a.Name))
		case a.IndexedByThreadID:
			d.Reasons = append(d.Reasons, fmt.Sprintf("static shared array %s (%d bytes) is indexed by threadIdx", a.Name, a.Bytes))
		}
	}
	multiDim := recordedBlock.Y > 1 || recordedBlock.Z > 1
	if multiDim && (f.ThreadIDDims[1] || f.ThreadIDDims[2]) {
		d.Reasons = append(d.Reasons, fmt.Sprintf("threadIdx.y/z read with a recorded %s block", recordedBlock))
	}
	if len(f.Opaque) > 0 {
		d.Reasons = append(d.Reasons, "code the analysis cannot see into ("+strings.Join(f.Opaque, ", ")+")")
	}
	if f.UnguardedIndex() {
		d.ExactCover, d.ExactCoverRule = true, ExactCoverRuleText
	}
	if len(d.Reasons) > 0 {
		d.Dependent = true
		return d
	}
	if d.ExactCover {
		d.Reasons = []string{"blockDim/gridDim appear only in global-index or grid-stride patterns and no static shared array is indexed by threadIdx, but the global index is unguarded: only blocks that divide the recorded threads"}
		return d
	}
	d.Reasons = []string{"blockDim/gridDim appear only in global-index or grid-stride patterns and no static shared array is indexed by threadIdx"}
	return d
}
