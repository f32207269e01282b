package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/internal/jsonfield"
	"github.com/mneme-gpu/mneme/internal/safefile"
)

// Plan is what the runtime does with the launches of one kernel: which
// configuration to compile it under and which block to launch it with.
type Plan struct {
	// Kernel is the mangled name, the key of the tuned file.
	Kernel string
	// Source is the file the plan came from, for warnings.
	Source string
	// Config holds the compile knobs only (pipeline, codegen level,
	// specialization, launch bounds, ptxas knobs). Geometry, shared memory
	// and the target are left zero: they are the running launch's and
	// device's. Use ConfigFor, which fits launch bounds to the launch.
	Config mneme.Config
	// Original is set when tuning found the application's own code best:
	// nothing is compiled, only TunedBlock may apply.
	Original bool
	// TunedBlock is the block to launch with; zero keeps the application's.
	TunedBlock mneme.Dim3
	// RecordedBlock and RecordedGrid are the recorded launch tuning started
	// from; zero when the file does not say.
	RecordedBlock, RecordedGrid mneme.Dim3
	// TunedGPU names the GPU the entry was tuned on ("" unknown).
	TunedGPU string
	// Proteus marks a plan read from a Proteus file: MinBlocksPerSM applies
	// only to launches of exactly MaxThreads threads, and SpecializeArgs
	// covers the arguments the application annotated as runtime constants.
	Proteus bool
	// Classes, when present, are the configurations per launch shape: a
	// launch takes its shape's (For), and a shape none names runs the
	// application's own code.
	Classes []*ClassPlan
	// Folded are the values a folded argument's variants were measured
	// with (Unmeasured): a launch with another value runs the
	// application's own code.
	Folded []FoldedValues
}

// Plans are the plans of a job, keyed by mangled kernel name.
type Plans map[string]*Plan

// CUDA's launch limits.
const (
	maxThreadsPerBlock = 1024
	maxGridX           = math.MaxInt32
	maxGridYZ          = math.MaxUint16
)

// Load reads the mneme tuned file and the Proteus tuned file, whichever path
// is non-empty. A kernel in both takes the mneme entry; a mneme entry that
// was dropped as invalid leaves the kernel's Proteus entry, if any, in
// force. Errors come back per file (a file's dropped kernels joined in one)
// instead of failing: the runtime warns once and runs the application's own
// code for whatever they cover.
func Load(mnemePath, proteusPath string) (Plans, []error) {
	plans := Plans{}
	var errs []error
	if mnemePath != "" {
		ps, err := ReadMnemeTuned(mnemePath)
		if err != nil {
			errs = append(errs, err)
		}
		for k, p := range ps {
			plans[k] = p
		}
	}
	if proteusPath != "" {
		ps, err := ReadProteusTuned(proteusPath)
		if err != nil {
			errs = append(errs, err)
		}
		for k, p := range ps {
			if _, ok := plans[k]; !ok {
				plans[k] = p
			}
		}
	}
	return plans, errs
}

// ReadMnemeTuned reads mneme_tuned_kernels.json: a JSON object keyed by
// mangled kernel name, each entry a TunedKernel. A file that cannot be read
// or is not such an object gives no plans and an error naming the file. An
// entry that is not valid drops that kernel alone: the plans of the others
// come back with an error naming the file, each dropped kernel and its field.
func ReadMnemeTuned(path string) (map[string]*Plan, error) {
	return readPlans(path, mnemePlan)
}

// ReadProteusTuned reads a Proteus PROTEUS_TUNED_KERNELS file the way
// Proteus does: keys are exact mangled names; Pipeline (empty: default<O
// OptLevel>); OptLevel read as a string of which only the first character
// counts (an integer is ignored and "3" used); CodeGenOptLevel (default 3);
// SpecializeArgs, LaunchBounds and SpecializeDims (default true);
// TunedMaxThreads and MinBlocksPerSM. A field of the wrong type counts as
// absent, unknown fields are ignored; CodeGen and SpecializeDimsRange are
// not used. Proteus never changes a launch's geometry. Errors are as in
// ReadMnemeTuned; a value out of range drops its kernel.
func ReadProteusTuned(path string) (map[string]*Plan, error) {
	return readPlans(path, proteusPlan)
}

// MaxTunedKernels bounds the entries of a tuned-kernels file, far above the
// kernels of any application: every process of the application loads the
// file, and a plan takes far more memory than its entry's bytes.
const MaxTunedKernels = 1 << 16

// countEntries counts the members of the JSON object data, stopping past
// limit; a null or another value is an error (syntax is checked later).
func countEntries(data []byte, limit int) (int, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return 0, err
	}
	if tok != json.Delim('{') {
		if tok == nil {
			return 0, errors.New("null")
		}
		return 0, fmt.Errorf("a %T", tok)
	}
	n := 0
	for dec.More() && n <= limit {
		if _, err := dec.Token(); err != nil {
			return 0, err
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return 0, err
		}
		n++
	}
	return n, nil
}

// readPlans reads a file keyed by kernel and turns each entry into a plan
// with entryPlan, collecting the entries' errors.
func readPlans(path string, entryPlan func(path, kernel string, raw json.RawMessage) (*Plan, error)) (map[string]*Plan, error) {
	data, err := safefile.ReadFile(path, safefile.MaxJSON)
	if err != nil {
		if errors.Is(err, safefile.ErrNotRegular) || errors.Is(err, safefile.ErrTooLarge) {
			return nil, err // the refusal names the file
		}
		return nil, mneme.BadInput(fmt.Errorf("tuned kernels file %s: %w", path, err))
	}
	if n, err := countEntries(data, MaxTunedKernels); err != nil {
		return nil, mneme.BadInput(fmt.Errorf("%s: not a JSON object keyed by kernel name: %v", path, err))
	} else if n > MaxTunedKernels {
		return nil, mneme.BadInput(fmt.Errorf("%s: more than %d kernels, the limit of a tuned-kernels file", path, MaxTunedKernels))
	}
	if err := jsonfield.Check(data); err != nil {
		return nil, mneme.BadInput(fmt.Errorf("%s: %w", path, err))
	}
	var entries map[string]json.RawMessage
	if err := json.Unmarshal(data, &entries); err != nil {
		return nil, mneme.BadInput(fmt.Errorf("%s: not a JSON object keyed by kernel name: %v", path, err))
	}
	if entries == nil {
		return nil, mneme.BadInput(fmt.Errorf("%s: not a JSON object keyed by kernel name (null)", path))
	}
	plans := make(map[string]*Plan, len(entries))
	var errs []error
	// Sorted, so the errors come in the same order every run.
	for _, kernel := range slices.Sorted(maps.Keys(entries)) {
		raw := entries[kernel]
		if kernel == "" {
			errs = append(errs, mneme.BadInput(fmt.Errorf("%s: an entry has an empty kernel name", path)))
			continue
		}
		if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
			errs = append(errs, mneme.BadInput(fmt.Errorf("%s: kernel %q: want an object (one kernel's entry)", path, kernel)))
			continue
		}
		p, err := entryPlan(path, kernel, raw)
		if err != nil {
			errs = append(errs, mneme.BadInput(fmt.Errorf("%s: kernel %q: %w", path, kernel, err)))
			continue
		}
		plans[kernel] = p
	}
	return plans, errors.Join(errs...)
}

// mnemePlan turns one mneme entry into a plan.
func mnemePlan(path, kernel string, raw json.RawMessage) (*Plan, error) {
	var present struct {
		Config json.RawMessage `json:"config"`
	}
	if err := json.Unmarshal(raw, &present); err != nil {
		return nil, err
	}
	if c := bytes.TrimSpace(present.Config); len(c) == 0 || c[0] != '{' {
		return nil, fmt.Errorf("config: want an object (the tuned configuration)")
	}
	// Fields the entry leaves out take the baseline's values (the default
	// pipeline, codegen level 3), not Go's zero values (codegen level 0).
	tk := TunedKernel{Config: mneme.Baseline(mneme.Dim3{}, mneme.Dim3{}, 0)}
	if err := json.Unmarshal(raw, &tk); err != nil {
		return nil, err
	}
	if err := checkCompileConfig(tk.Config); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := tk.Validate(); err != nil {
		return nil, err
	}
	if tk.Config.Passes == "" && !tk.Config.Original {
		tk.Config.Passes = mneme.DefaultPipeline
	}
	p := &Plan{Kernel: kernel, Source: path, Config: compileKnobs(tk.Config), Original: tk.Config.Original,
		RecordedBlock: normDim(tk.RecordedBlock), RecordedGrid: normDim(tk.RecordedGrid), TunedGPU: tk.GPU,
		Classes: classPlans(kernel, path, &tk), Folded: foldedValues(&tk)}
	for _, c := range p.Classes {
		c.Folded = p.Folded
	}
	if tk.LaunchSearched && !tk.Config.Block.IsZero() {
		if b := normDim(tk.Config.Block); b != p.RecordedBlock {
			p.TunedBlock = b
		}
	}
	return p, nil
}

// checkCompileConfig is Config.Validate plus what a launch needs that
// Validate leaves to the device: launch bounds within CUDA's block limit.
func checkCompileConfig(c mneme.Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if c.SetLaunchBounds && c.MaxThreads > maxThreadsPerBlock {
		return fmt.Errorf("%s %d: exceeds CUDA's limit of %d threads per block", mneme.KeyMaxThreads, c.MaxThreads, maxThreadsPerBlock)
	}
	return nil
}

// compileKnobs keeps what reaches the compiler: geometry and shared memory
// belong to the launch, the target to the running device.
func compileKnobs(c mneme.Config) mneme.Config {
	c.Grid, c.Block, c.SharedMem = mneme.Dim3{}, mneme.Dim3{}, 0
	c.Arch, c.PTXVersion = "", 0
	c.Original = false
	return c
}

// normDim reads a zero component of a non-zero shape as 1, as CUDA's dim3
// does; the zero shape stays zero (unknown).
func normDim(d mneme.Dim3) mneme.Dim3 {
	if d.IsZero() {
		return d
	}
	for _, c := range []*uint32{&d.X, &d.Y, &d.Z} {
		if *c == 0 {
			*c = 1
		}
	}
	return d
}

// proteusFields is one Proteus entry read leniently, as Proteus's JSON
// accessors do: a field of another type is absent.
type proteusFields map[string]any

func (f proteusFields) str(name string) (string, bool) {
	s, ok := f[name].(string)
	return s, ok
}

func (f proteusFields) boolean(name string, def bool) bool {
	if b, ok := f[name].(bool); ok {
		return b
	}
	return def
}

// integer accepts a number with an integral value, as LLVM's
// json::Value::getAsInteger does (3 and 3.0, not 3.5).
func (f proteusFields) integer(name string) (int, bool) {
	n, ok := f[name].(json.Number)
	if !ok {
		return 0, false
	}
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return int(i), true
	}
	x, err := strconv.ParseFloat(string(n), 64)
	if err != nil || x != math.Trunc(x) || x < math.MinInt64 || x >= math.MaxInt64 {
		return 0, false
	}
	return int(x), true
}

// proteusPlan turns one Proteus entry into a plan.
func proteusPlan(path, kernel string, raw json.RawMessage) (*Plan, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var f proteusFields
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	c := mneme.Config{CodegenOpt: 3, Prune: true, Internalize: true,
		Specialize: f.boolean("SpecializeArgs", true), SpecializeDims: f.boolean("SpecializeDims", true)}
	if p, ok := f.str("Pipeline"); ok && p != "" {
		c.Passes = p
	} else {
		level := "3"
		if s, ok := f.str("OptLevel"); ok && s != "" {
			level = s[:1]
		}
		if !strings.Contains("0123sz", level) {
			s, _ := f.str("OptLevel")
			return nil, fmt.Errorf("OptLevel %q: its first character must be 0, 1, 2, 3, s or z", s)
		}
		c.Passes = "default<O" + level + ">"
	}
	if n, ok := f.integer("CodeGenOptLevel"); ok {
		if n < 0 || n > 3 {
			return nil, fmt.Errorf("CodeGenOptLevel %d: must be 0..3", n)
		}
		c.CodegenOpt = n
	}
	if f.boolean("LaunchBounds", true) {
		if mt, ok := f.integer("TunedMaxThreads"); ok && mt > 0 {
			if mt > maxThreadsPerBlock {
				return nil, fmt.Errorf("TunedMaxThreads %d: exceeds CUDA's limit of %d threads per block", mt, maxThreadsPerBlock)
			}
			c.SetLaunchBounds, c.MaxThreads = true, mt
			// Proteus gives no minimum for a value of 0 or less.
			if mb, ok := f.integer("MinBlocksPerSM"); ok && mb > 0 {
				if mb > math.MaxInt32 {
					return nil, fmt.Errorf("MinBlocksPerSM %d: too large", mb)
				}
				c.MinBlocksPerSM = mb
			}
		}
	}
	if err := checkCompileConfig(c); err != nil {
		return nil, err
	}
	return &Plan{Kernel: kernel, Source: path, Config: c, Proteus: true}, nil
}

// ConfigFor is the compile configuration for a launch with block (the block
// it is launched with, after Geometry). Launch bounds below the launch's
// threads per block would make the launch fail, so they are dropped; a
// Proteus plan keeps MinBlocksPerSM only for launches of exactly MaxThreads
// threads, as Proteus does. The result shares nothing with the plan.
func (p *Plan) ConfigFor(block mneme.Dim3) mneme.Config {
	c := p.Config
	c.SpecializeArgs = slices.Clone(c.SpecializeArgs)
	if !c.SetLaunchBounds {
		return c
	}
	threads := block.Count()
	switch {
	case c.MaxThreads <= 0 || uint64(c.MaxThreads) < threads:
		c.SetLaunchBounds, c.MaxThreads, c.MinBlocksPerSM = false, 0, 0
	case p.Proteus && uint64(c.MaxThreads) != threads:
		c.MinBlocksPerSM = 0
	}
	return c
}

// Geometry is the launch geometry to use for a launch of grid and block.
// With a TunedBlock the block becomes it and each grid dimension is derived
// again so the threads still cover the launch's: ceil(grid*block/tuned), as
// tuning derived it. The launch is kept as it is when there is no tuned
// block, when the launch's block is not the recorded one the tuning started
// from (the kernel was judged geometry-agnostic for that launch only), when
// grid or block has a zero dimension (CUDA refuses it either way), or when
// the derived grid would exceed CUDA's limits.
func (p *Plan) Geometry(grid, block mneme.Dim3) (newGrid, newBlock mneme.Dim3) {
	tuned := p.TunedBlock
	if tuned.IsZero() || tuned == block || hasZeroDim(tuned) || hasZeroDim(grid) || hasZeroDim(block) ||
		tuned.Count() > maxThreadsPerBlock {
		return grid, block
	}
	if !p.RecordedBlock.IsZero() && block != p.RecordedBlock {
		return grid, block
	}
	x, okX := rederive(grid.X, block.X, tuned.X, maxGridX)
	y, okY := rederive(grid.Y, block.Y, tuned.Y, maxGridYZ)
	z, okZ := rederive(grid.Z, block.Z, tuned.Z, maxGridYZ)
	if !okX || !okY || !okZ {
		return grid, block
	}
	return mneme.Dim3{X: x, Y: y, Z: z}, tuned
}

func hasZeroDim(d mneme.Dim3) bool { return d.X == 0 || d.Y == 0 || d.Z == 0 }

// rederive is the grid dimension that covers grid*block threads in blocks
// of tuned; an unchanged block dimension keeps the grid's. All three are
// positive here, so the result is too.
func rederive(grid, block, tuned uint32, limit uint64) (uint32, bool) {
	if tuned == block {
		return grid, true
	}
	n := (uint64(grid)*uint64(block) + uint64(tuned) - 1) / uint64(tuned)
	if n > limit {
		return 0, false
	}
	return uint32(n), true
}
