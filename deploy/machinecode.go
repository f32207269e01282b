package deploy

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/nvbin"
)

// Deployment into an application seen through the driver (built without
// mneme's wrapper, recorded as machine code): there is no IR to compile, so
// a tuned entry can change two things only, each where it holds: the launch
// geometry (Plan.Geometry: a tuned block, for launches of the recorded
// block) and the assembler knobs (ptxas level, register cap) applied to the
// PTX the application's own fat binary embeds. An entry asking for more
// (folding, launch bounds, a pipeline: an IR tuning's) leaves its kernel
// alone, as does any failure to assemble or fit the tuned code.

// Assembler is the driver side of a machine-code deployment: the
// injection library implements it over the CUDA driver, tests with a fake.
type Assembler interface {
	// Assemble assembles kernel from the PTX of module image under the
	// ptxas level (0: the driver's default) and register cap (0: none),
	// loads it and returns its function handle.
	Assemble(image int, kernel string, ptxasOpt, maxRegisters int) (fn uint64, err error)
	// Fits reports whether fn (one Assemble returned, or the application's
	// own) can be launched with threads threads per block and shared bytes
	// of dynamic shared memory, opening the function up to shared first
	// where that needs it: a launch the driver refused would fail in the
	// application.
	Fits(fn uint64, threads uint64, shared uint32) error
}

// MachineCodeLaunch is what one launch runs: Fn is 0 for the
// application's own function; Grid and Block are the launch's geometry,
// tuned or not.
type MachineCodeLaunch struct {
	Fn          uint64
	Grid, Block mneme.Dim3
}

// Changed reports whether the launch differs from the application's.
func (l MachineCodeLaunch) Changed(grid, block mneme.Dim3) bool {
	return l.Fn != 0 || l.Grid != grid || l.Block != block
}

// MachineCodeRuntime applies tuned entries to the launches of one process.
// Set the fields, then use it from any number of threads.
type MachineCodeRuntime struct {
	Plans Plans
	Asm   Assembler
	// Warn prints one warning line (may be nil).
	Warn func(msg string)

	mu      sync.Mutex
	kernels map[mcKey]*mcKernel
}

type mcKey struct {
	name  string
	image int
}

type mcKernel struct {
	plan     *Plan
	fn       uint64 // the reassembled code; 0 when the plan keeps the application's
	disabled bool
	misfit   bool // a launch the tuned code could not take was warned of
	// Launches and Tuned count the kernel's launches and those changed.
	launches, tuned uint64
}

// MachineCodeStats are one kernel's launches in a deployment.
type MachineCodeStats struct {
	Kernel          string
	Launches, Tuned uint64
	Disabled        bool
}

// usableOnMachineCode says why a plan cannot apply to machine code, "" when
// it can: it asks for what needs IR.
func usableOnMachineCode(p *Plan) string {
	c := p.Config
	switch {
	case len(p.Classes) > 0:
		return "its configurations per launch shape (classes) come from a tuning with IR"
	case c.Specialize || len(c.SpecializeArgs) > 0 || c.SpecializeDims:
		return "it folds arguments or dimensions, which needs IR"
	case c.SetLaunchBounds:
		return "it sets launch bounds, which needs IR"
	case c.FPContract != "":
		return "it sets fp_contract, which needs IR"
	case !p.Original && ((c.Passes != "" && c.Passes != mneme.DefaultPipeline) || (c.CodegenOpt != 0 && c.CodegenOpt != 3)):
		return fmt.Sprintf("it recompiles with pipeline %q at codegen level %d, which needs IR", c.Passes, c.CodegenOpt)
	}
	return ""
}

// reassembles: the plan sets an assembler knob.
func (p *Plan) reassembles() bool {
	return !p.Original && (p.Config.PtxasOpt != 0 || p.Config.MaxRegisters != 0)
}

// Launch decides what a launch of kernel (mangled name, from module image,
// the application's function handle appFn) with grid, block and dynamic
// shared memory runs. A kernel without a plan, or whose plan cannot apply,
// runs as the application launched it.
func (r *MachineCodeRuntime) Launch(kernel string, image int, appFn uint64, grid, block mneme.Dim3, shared uint32) MachineCodeLaunch {
	own := MachineCodeLaunch{Grid: grid, Block: block}
	r.mu.Lock()
	defer r.mu.Unlock()
	k := r.kernel(kernel, image)
	if k == nil {
		return own
	}
	k.launches++
	if k.disabled {
		return own
	}
	out := own
	out.Grid, out.Block = k.plan.Geometry(grid, block)
	out.Fn = k.fn
	if out.Fn != 0 || out.Block != block {
		fn := out.Fn
		if fn == 0 {
			fn = appFn
		}
		if err := r.Asm.Fits(fn, out.Block.Count(), shared); err != nil {
			// The tuned code or shape cannot take this launch: the
			// application's own, for this launch only (warned once).
			if k.misfit {
				return own
			}
			k.misfit = true
			r.warnf("kernel %s: a launch of block %s and %d bytes of shared memory keeps the application's code: %v", kernel, out.Block, shared, err)
			return own
		}
	}
	if out.Changed(grid, block) {
		k.tuned++
	}
	return out
}

// kernel finds or prepares a kernel's state; nil when it has no plan.
// r.mu is held.
func (r *MachineCodeRuntime) kernel(name string, image int) *mcKernel {
	key := mcKey{name, image}
	if k, ok := r.kernels[key]; ok {
		return k
	}
	if r.kernels == nil {
		r.kernels = map[mcKey]*mcKernel{}
	}
	p := r.Plans[name]
	if p == nil {
		r.kernels[key] = nil
		return nil
	}
	k := &mcKernel{plan: p}
	r.kernels[key] = k
	if why := usableOnMachineCode(p); why != "" {
		r.warnf("kernel %s: the tuned entry in %s is not applied (%s); the application's code runs", name, p.Source, why)
		k.disabled = true
		return k
	}
	if p.reassembles() {
		fn, err := r.Asm.Assemble(image, name, p.Config.PtxasOpt, p.Config.MaxRegisters)
		if err != nil || fn == 0 {
			r.warnf("kernel %s: assembling its PTX under the tuned ptxas knobs failed (%v); the application's code runs", name, err)
			k.disabled = true
			return k
		}
		k.fn = fn
	}
	return k
}

// Failed reports that a launch of kernel changed by Launch failed: its
// later launches run the application's code (the failed one is the
// application's to see; a launch cannot be taken back).
func (r *MachineCodeRuntime) Failed(kernel string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for key, k := range r.kernels {
		if key.name == kernel && k != nil && !k.disabled {
			k.disabled = true
			r.warnf("kernel %s: a tuned launch failed (%v); its later launches run the application's code", kernel, err)
		}
	}
}

func (r *MachineCodeRuntime) warnf(format string, args ...any) {
	if r.Warn != nil {
		r.Warn(fmt.Sprintf(format, args...))
	}
}

// Stats are the launches of every kernel with a plan, in no order.
func (r *MachineCodeRuntime) Stats() []MachineCodeStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []MachineCodeStats
	for key, k := range r.kernels {
		if k != nil {
			out = append(out, MachineCodeStats{Kernel: key.name, Launches: k.launches, Tuned: k.tuned, Disabled: k.disabled})
		}
	}
	return out
}

// ReassemblyPTX is the PTX to assemble kernel from under tuned ptxas knobs:
// the PTX module image (a fat binary's or PTX text) embeds for a GPU of
// architecture arch (90 for sm_90). It is refused when the module declares
// variables in global or constant memory other than the compiler's own
// tables ($str..., __cudart_...): the reassembled module would get copies
// of its own, which the application's code writes and reads elsewhere.
func ReassemblyPTX(image []byte, kernel string, arch int) ([]byte, error) {
	ptx, err := nvbin.EmbeddedPTX(image, kernel, arch)
	if err != nil {
		return nil, err
	}
	var shared []string
	for _, v := range nvbin.PTXVariables(ptx) {
		if !strings.HasPrefix(v, "$") && !strings.HasPrefix(v, "__cudart_") {
			shared = append(shared, v)
		}
	}
	if len(shared) > 0 {
		return nil, fmt.Errorf("its module declares device variables (%s), which a module assembled again would not share with the application's", strings.Join(shared, ", "))
	}
	return ptx, nil
}

// Reassembles reports whether the plan sets an assembler knob, whose code
// is assembled from the module's embedded PTX.
func (p *Plan) Reassembles() bool { return p.reassembles() }

// CheckMachineCode is Check for an executable built without mneme's
// wrapper (kernels from its fat binaries), whose tuned kernels deploy
// through the injection library: an entry that needs IR is invalid there
// (the application's own code runs), one that changes neither the block
// nor the assembly is own-code, the rest deploy their block and assembler
// knobs.
func CheckMachineCode(plans Plans, kernels []string, gpu string) CheckReport {
	var rep CheckReport
	for _, n := range slices.Sorted(maps.Keys(plans)) {
		p := plans[n]
		row := CheckRow{Kernel: n, Source: p.Source}
		var notes []string
		why := usableOnMachineCode(p)
		switch {
		case !slices.Contains(kernels, n):
			row.Status = StatusUnknown
			if s := closest(n, kernels); s != "" {
				notes = append(notes, "did you mean "+s+"?")
			}
		case why != "":
			row.Status = StatusInvalid
			notes = append(notes, "not applied to machine code: "+why)
		case !p.Reassembles() && p.TunedBlock.IsZero():
			row.Status = StatusOriginal
			rep.Matched++
		default:
			row.Status = StatusDeployed
			rep.Matched++
			notes = append(notes, machineDescribe(p))
		}
		rep.addRow(row, notes, p, gpu)
	}
	return rep
}

// machineDescribe is what a plan changes in machine code.
func machineDescribe(p *Plan) string {
	var parts []string
	if !p.TunedBlock.IsZero() {
		parts = append(parts, "block "+p.TunedBlock.String()+" for launches of block "+p.RecordedBlock.String())
	}
	if p.Reassembles() {
		parts = append(parts, fmt.Sprintf("PTX reassembled (ptxas_opt %d, max_registers %d)", p.Config.PtxasOpt, p.Config.MaxRegisters))
	}
	return strings.Join(parts, ", ")
}
