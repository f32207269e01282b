package replay

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/internal/safefile"
	"github.com/mneme-gpu/mneme/jit"
	"github.com/mneme-gpu/mneme/llvm"
)

// InputError is a problem with what the user handed in (database, snapshot,
// IR file, configuration), as opposed to a failure of the machine: the one
// kind every command reports as bad input.
type InputError = mneme.InputError

func inputErr(format string, a ...any) error { return &InputError{Err: fmt.Errorf(format, a...)} }

// Recording is one recorded launch loaded on the host: everything replay
// needs that does not involve a GPU. A compile-only session holds just this.
type Recording struct {
	DB       *db.DB
	Kernel   *db.Kernel
	Instance *db.Instance
	IRPath   string
	IR       []byte // bitcode holding the kernel
	// DeviceCode is the fat binary the application registered for the
	// kernel; nil for recordings made before it was kept.
	DeviceCode []byte
	Args       [][]byte
	// Prologue and Epilogue hold the globals and arguments with their data
	// and the allocations without: those stay in the files, streamed into
	// device memory when a session opens (never a host buffer of their
	// size), through the streams below.
	Prologue *db.Snapshot
	Epilogue *db.Snapshot
	// proStream and epiStream read the allocations' bytes; nil for a
	// compile-only recording, and after Close.
	proStream, epiStream *db.SnapshotStream
	// changed is what the kernel changed (db.ChangedRanges), found by a
	// streamed comparison of the two snapshots at load.
	changed []db.Range
	VAddr   uint64
	// globalNames are the recorded device globals, which internalization
	// must keep visible so replay can restore and compare them by name.
	globalNames []string
	// irGlobals are the global variables the kernel's IR reaches.
	irGlobals []llvm.KernelGlobal
	// Writes is what the kernel's IR writes where, for typed verification;
	// nil when the analysis failed (every buffer then compares bitwise),
	// and WritesError says why.
	Writes      *llvm.KernelWrites
	WritesError error
}

// Load reads the database at path (a directory or one kernel's JSON file),
// resolves the instance id (empty: the only instance) among the kernels that
// kernel names (empty: all; else a static hash or its prefix, or a mangled or
// demangled kernel name), reads its IR and both snapshots and checks that
// they describe the same memory.
func Load(path, kernel, instance string) (*Recording, error) {
	return load(path, kernel, instance, true)
}

// LoadForCompile reads what compiling the kernel needs, as Load does, but of
// the snapshots only the prologue's metadata (the device globals' names):
// Prologue holds no data and Epilogue is nil.
func LoadForCompile(path, kernel, instance string) (*Recording, error) {
	return load(path, kernel, instance, false)
}

// checkManaged refuses an instance that would touch managed memory the
// application used while it was recorded: arguments pointing into a
// cudaMallocManaged allocation or a placed __managed__ variable, or a
// kernel that reads a __managed__ variable (globals is what its IR
// reaches; nil for a kernel recorded without IR). That memory lies outside
// the recording arena and in no snapshot, so the kernel would run on
// addresses nothing backs (an illegal address at best) or on values
// nothing restored. It is checked before any GPU is touched.
func checkManaged(d *db.DB, k *db.Kernel, inst *db.Instance, globals []llvm.KernelGlobal) error {
	managed, err := db.ReadManaged(d.Dir)
	if err != nil {
		return &InputError{Err: err}
	}
	listFile := d.Path(db.ManagedFileName)
	var snapshotted map[string]bool
	if managed.DroppedVariables > 0 && len(globals) > 0 {
		// The globals the snapshot holds are not managed ones.
		pro, err := d.ReadPrologueMetadata(k, inst)
		if err != nil {
			return snapshotErr(err)
		}
		snapshotted = map[string]bool{}
		for _, g := range pro.Globals {
			snapshotted[g.Name] = true
		}
	}
	if vars := managedVariablesRead(globals, managed, snapshotted); len(vars) > 0 {
		return inputErr("instance %s of kernel %s cannot be replayed: it reads the __managed__ variable(s) %s, whose managed memory no snapshot holds (%s lists the %d __managed__ variable(s) of the run)",
			inst.DynamicHash, k.Name(), strings.Join(vars, ", "), listFile, len(managed.Variables))
	}
	if k.MachineCodeOnly() && (len(managed.Variables) > 0 || managed.DroppedVariables > 0) {
		names := make([]string, len(managed.Variables))
		for i, v := range managed.Variables {
			names[i] = v.Name
		}
		return inputErr("instance %s of kernel %s cannot be replayed: the application has __managed__ variables (%s; listed in %s), whose managed memory no snapshot holds, and the kernel was recorded without IR, so whether it reads them cannot be known",
			inst.DynamicHash, k.Name(), strings.Join(names, ", "), listFile)
	}
	hits, err := db.ManagedArguments(k, inst, managed)
	if err != nil {
		return &InputError{Err: err}
	}
	if len(hits) == 0 {
		return nil
	}
	parts := make([]string, len(hits))
	for i, h := range hits {
		parts[i] = h.String()
	}
	return inputErr("instance %s of kernel %s cannot be replayed: %s; managed memory (cudaMallocManaged, __managed__) is not in the recording (%s lists the %d managed allocation(s) of the run)",
		inst.DynamicHash, k.Name(), strings.Join(parts, "; "), listFile, len(managed.Allocations))
}

// managedVariablesRead names the __managed__ variables among the globals a
// kernel's IR reaches: those its IR marks managed, and those the recording
// lists by name (clang-22 ignores __managed__ in CUDA, so IR compiled by
// another front end may carry the mark where the registration is all we
// saw, or the reverse). With the list incomplete (DroppedVariables), any
// global the snapshot does not hold (snapshotted) might be one.
func managedVariablesRead(globals []llvm.KernelGlobal, managed *db.ManagedList, snapshotted map[string]bool) []string {
	var out []string
	for _, g := range globals {
		v, listed := managed.Variable(g.Name)
		switch {
		case listed && v.Addr != "":
			out = append(out, fmt.Sprintf("%s (%d bytes at %s)", g.Name, v.Size, v.Addr))
		case listed:
			out = append(out, fmt.Sprintf("%s (%d bytes)", g.Name, v.Size))
		case g.Managed:
			out = append(out, g.Name+" (marked managed in the IR)")
		case managed.DroppedVariables > 0 && !snapshotted[g.Name]:
			out = append(out, fmt.Sprintf("%s (perhaps: %d __managed__ variable(s) went unlisted)", g.Name, managed.DroppedVariables))
		}
	}
	return out
}

func load(path, kernel, instance string, withData bool) (*Recording, error) {
	d, err := db.Open(path)
	if err != nil {
		return nil, &InputError{Err: err}
	}
	search := d
	if kernel != "" {
		search = &db.DB{Dir: d.Dir}
		for _, k := range d.Kernels {
			if strings.HasPrefix(k.StaticHash, kernel) || k.KernelName == kernel || k.DemangledName == kernel {
				search.Kernels = append(search.Kernels, k)
			}
		}
		if len(search.Kernels) == 0 {
			return nil, inputErr("kernel %q: no kernel of %s has that static hash or name", kernel, path)
		}
	}
	k, inst, err := search.Find(instance)
	if err != nil {
		return nil, &InputError{Err: fmt.Errorf("instance: %w", err)}
	}
	r := &Recording{DB: d, Kernel: k, Instance: inst}
	if r.VAddr, err = k.ParseVAddr(); err != nil {
		return nil, inputErr("%s: %w", d.Path(db.KernelFileName(k.StaticHash)), err)
	}
	if !k.MachineCodeOnly() {
		// A kernel recorded through the driver has no IR: its recorded
		// machine code is all replay runs.
		r.IRPath = d.IRPath(k)
		if r.IR, err = d.ReadFile(k.Modules[0], safefile.MaxIR); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, inputErr("recorded IR of kernel %s: %s does not exist", k.Name(), r.IRPath)
			}
			return nil, inputErr("recorded IR of kernel %s: %w", k.Name(), err)
		}
		if r.Writes, r.WritesError, r.irGlobals, err = checkIR(r.IRPath, r.IR, k.KernelName); err != nil {
			return nil, err
		}
	}
	if k.DeviceCode != "" {
		if r.DeviceCode, err = d.ReadFile(k.DeviceCode, safefile.MaxIR); err != nil {
			return nil, inputErr("recorded device code of kernel %s: %w", k.Name(), err)
		}
	}
	if r.Args, err = d.ArgBytes(inst); err != nil {
		return nil, &InputError{Err: err}
	}
	if withData {
		if err := checkManaged(d, k, inst, r.irGlobals); err != nil {
			return nil, err
		}
	}
	if !withData {
		if r.Prologue, err = d.ReadPrologueMetadata(k, inst); err != nil {
			return nil, snapshotErr(err)
		}
	} else if err := r.openSnapshots(); err != nil {
		r.Close()
		return nil, err
	}
	for _, g := range r.Prologue.Globals {
		r.globalNames = append(r.globalNames, g.Name)
	}
	if n := len(r.Prologue.Args); n > 0 && n != len(r.Args) {
		r.Close()
		return nil, inputErr("%s: %d arguments, but the instance records %d", d.Path(inst.Prologue), n, len(r.Args))
	}
	return r, nil
}

// openSnapshots opens both snapshots for streaming and compares them chunk
// by chunk: every chunk's checksum is verified here, before any device is
// touched, and what the kernel changed is known without holding either.
func (r *Recording) openSnapshots() error {
	d, k, inst := r.DB, r.Kernel, r.Instance
	var err error
	if r.proStream, err = d.OpenPrologueStream(k, inst); err != nil {
		return snapshotErr(err)
	}
	if r.epiStream, err = d.OpenEpilogueStream(k, inst); err != nil {
		return snapshotErr(err)
	}
	r.Prologue, r.Epilogue = r.proStream.Snapshot, r.epiStream.Snapshot
	if err := matchSnapshots(r.Prologue, r.Epilogue, d.Path(inst.Prologue), d.Path(inst.Epilogue)); err != nil {
		return err
	}
	if r.changed, err = db.ChangedRangesStream(r.proStream, r.epiStream); err != nil {
		return snapshotErr(err)
	}
	return nil
}

// Close releases the snapshot files. A session drains them into device
// memory when it opens and closes them then; a recording loaded for
// anything else is closed by its user.
func (r *Recording) Close() {
	r.proStream.Close()
	r.epiStream.Close()
	r.proStream, r.epiStream = nil, nil
}

// blobChanged reports whether the recording shows the kernel changing any
// byte of allocation i.
func (r *Recording) blobChanged(i int) bool {
	b := r.Prologue.Blobs[i]
	for _, c := range r.changed {
		if c.Global == "" && c.Addr < b.Addr+b.Size && b.Addr < c.Addr+c.Size {
			return true
		}
	}
	return false
}

// snapshotErr classifies a snapshot read: a snapshot too large for this
// machine is out of resources, any other problem with the file bad input.
func snapshotErr(err error) error {
	if errors.Is(err, mneme.ErrOutOfResources) {
		return err
	}
	return &InputError{Err: err}
}

// checkIR parses the bitcode once, so a corrupt file or one that lacks the
// kernel is reported at open, naming the file, not at the first compile.
// While it is parsed, it also analyzes what the kernel writes, once per
// session; a failed analysis (writesErr) is no input error: verification
// then compares every buffer bitwise. It also lists the global variables
// the kernel reaches (globals), for the managed-memory check.
func checkIR(path string, ir []byte, kernel string) (writes *llvm.KernelWrites, writesErr error, globals []llvm.KernelGlobal, err error) {
	mod, err := llvm.ParseBitcode(ir, path)
	if err != nil {
		return nil, nil, nil, &InputError{Err: err}
	}
	defer mod.Dispose()
	for _, k := range mod.Kernels() {
		if k == kernel {
			if globals, err = mod.KernelGlobals(kernel); err != nil {
				return nil, nil, nil, inputErr("%s: %w", path, err)
			}
			writes, writesErr = mod.KernelWrites(kernel)
			return writes, writesErr, globals, nil
		}
	}
	return nil, nil, nil, inputErr("%s: holds no kernel named %s (it has %v)", path, kernel, mod.Kernels())
}

// matchSnapshots requires the epilogue to describe the same allocations and
// globals as the prologue: a kernel cannot allocate, so anything else means
// the files do not belong together.
func matchSnapshots(pro, epi *db.Snapshot, proPath, epiPath string) error {
	if len(pro.Blobs) != len(epi.Blobs) {
		return inputErr("%s holds %d allocations but %s holds %d: the snapshots do not belong together", proPath, len(pro.Blobs), epiPath, len(epi.Blobs))
	}
	for i := range pro.Blobs {
		p, e := pro.Blobs[i], epi.Blobs[i]
		if p.Addr != e.Addr || p.Size != e.Size {
			return inputErr("allocation %d: 0x%x (%d bytes) in %s but 0x%x (%d bytes) in %s", i, p.Addr, p.Size, proPath, e.Addr, e.Size, epiPath)
		}
	}
	if len(pro.Globals) != len(epi.Globals) {
		return inputErr("%s holds %d device globals but %s holds %d", proPath, len(pro.Globals), epiPath, len(epi.Globals))
	}
	for i := range pro.Globals {
		p, e := pro.Globals[i], epi.Globals[i]
		if p.Name != e.Name || p.Size != e.Size {
			return inputErr("device global %d: %s (%d bytes) in %s but %s (%d bytes) in %s", i, p.Name, p.Size, proPath, e.Name, e.Size, epiPath)
		}
	}
	return nil
}

// Baseline is the configuration that reproduces the recorded launch as the
// application compiled it: the recorded geometry, and the -O level and ptxas
// options of its compile where the recording has them (CompileFlags); like
// mneme.Baseline it does not internalize.
func (r *Recording) Baseline() mneme.Config {
	cfg := mneme.Baseline(r.Instance.GridDims, r.Instance.BlockDims, r.Instance.SharedMem)
	return ApplyCompileFlags(cfg, r.Kernel.CompileFlags)
}

// ApplyCompileFlags sets what the application's compile flags say about its
// device code: the -O level chooses the pipeline (default<On>) and the
// codegen level as clang does, -Xcuda-ptxas -O<n> and -maxrregcount the
// ptxas knobs. The last of repeated flags wins; others are ignored.
func ApplyCompileFlags(cfg mneme.Config, flags []string) mneme.Config {
	levels := map[string]struct {
		pipeline string
		codegen  int
	}{
		"-O0": {"default<O0>", 0}, "-O1": {"default<O1>", 1}, "-Og": {"default<O1>", 1},
		"-O2": {"default<O2>", 2}, "-O3": {"default<O3>", 3}, "-Ofast": {"default<O3>", 3},
		"-Os": {"default<Os>", 2}, "-Oz": {"default<Oz>", 2},
	}
	for i := 0; i < len(flags); i++ {
		if l, ok := levels[flags[i]]; ok {
			cfg.Passes, cfg.CodegenOpt = l.pipeline, l.codegen
			continue
		}
		if flags[i] != "-Xcuda-ptxas" || i+1 >= len(flags) {
			continue
		}
		i++
		opt := flags[i]
		var n int
		switch {
		case len(opt) == 3 && strings.HasPrefix(opt, "-O") && opt[2] >= '1' && opt[2] <= '3':
			cfg.PtxasOpt = int(opt[2] - '0')
		case strings.HasPrefix(opt, "-maxrregcount=") || strings.HasPrefix(opt, "--maxrregcount="):
			if _, err := fmt.Sscanf(opt[strings.Index(opt, "=")+1:], "%d", &n); err == nil && n > 0 && n <= 255 {
				cfg.MaxRegisters = n
			}
		case opt == "-maxrregcount" || opt == "--maxrregcount":
			if i+2 < len(flags) && flags[i+1] == "-Xcuda-ptxas" {
				if _, err := fmt.Sscanf(flags[i+2], "%d", &n); err == nil && n > 0 && n <= 255 {
					cfg.MaxRegisters = n
				}
				i += 2
			}
		}
	}
	return cfg
}

// HasOriginal reports whether the recording holds the application's own
// device code, which Config.Original runs.
func (r *Recording) HasOriginal() bool { return len(r.DeviceCode) > 0 }

// Resolve fills what a configuration leaves unset with the recorded values:
// the geometry, the shared memory, and for an empty pipeline the
// application's own -O level (pipeline and codegen level). A kernel recorded
// as machine code runs its recorded code, unless an assembler knob asks for
// its embedded PTX to be assembled again (which Original would refuse as a
// knob of recompiling).
func (r *Recording) Resolve(cfg mneme.Config) mneme.Config {
	if r.Kernel.MachineCodeOnly() && cfg.PtxasOpt == 0 && cfg.MaxRegisters == 0 {
		cfg.Original = true // nothing else to run (MachineCodeCheck refuses what needs IR)
	}
	cfg.Grid = fillDim(cfg.Grid, r.Instance.GridDims)
	cfg.Block = fillDim(cfg.Block, r.Instance.BlockDims)
	if cfg.SharedMem == 0 {
		cfg.SharedMem = r.Instance.SharedMem
	}
	if cfg.Passes == "" {
		b := r.Baseline()
		cfg.Passes, cfg.CodegenOpt = b.Passes, b.CodegenOpt
	}
	return cfg
}

// MachineCodeCheck refuses, for a kernel recorded as machine code only,
// the settings that need its IR: folding arguments or dimensions in and
// launch bounds. Launch geometry and shared memory may change.
func (r *Recording) MachineCodeCheck(cfg mneme.Config) error {
	if !r.Kernel.MachineCodeOnly() {
		return nil
	}
	switch {
	case cfg.Specialize:
		return errors.New("kernel " + r.Kernel.Name() + " was recorded as machine code only (through the driver): its arguments cannot be folded in")
	case cfg.SpecializeDims:
		return errors.New("kernel " + r.Kernel.Name() + " was recorded as machine code only (through the driver): its launch dimensions cannot be folded in")
	case cfg.SetLaunchBounds:
		return errors.New("kernel " + r.Kernel.Name() + " was recorded as machine code only (through the driver): launch bounds need its IR")
	case cfg.FPContract != "":
		return errors.New("kernel " + r.Kernel.Name() + " was recorded as machine code only (through the driver): fp_contract needs its IR (the driver's assembler has no such knob)")
	}
	return nil
}

// fillDim takes the recorded shape for an unset one. A partial one (JSON
// {"x":128}) was completed with 1s when it was read; a component given as 0
// stays 0, for Validate to refuse.
func fillDim(d, recorded mneme.Dim3) mneme.Dim3 {
	if d.IsZero() {
		return recorded
	}
	return d
}

// ValidatePipeline checks pass-pipeline text without compiling the kernel,
// by running it over an empty module: a typo is bad input, reported before
// any GPU or compile work.
func ValidatePipeline(passes string) error {
	mod, err := llvm.ParseIR("", "pipeline check")
	if err != nil {
		return err
	}
	defer mod.Dispose()
	tm, err := llvm.NewTargetMachine(jit.DefaultArch, 0, 0)
	if err != nil {
		return err
	}
	defer tm.Dispose()
	if err := mod.RunPasses(passes, tm); err != nil {
		return &InputError{Err: err}
	}
	return nil
}
