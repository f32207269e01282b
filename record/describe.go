package record

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
)

// describeKernel builds the kernel's database entry and writes its IR.
func (r *Recorder) describeKernel(l *Launch) (*db.Kernel, error) {
	if r.throughDriver {
		return r.describeMachineCode(l)
	}
	start := time.Now()
	ir, err := r.proc.KernelIR(l.Kernel.Name)
	r.status.IRSeconds += time.Since(start).Seconds()
	if err != nil {
		return nil, err
	}
	sizes := make([]uint64, len(l.Args))
	for i, a := range l.Args {
		sizes[i] = uint64(len(a))
	}
	names, kinds, specs, err := argMeta(ir, sizes)
	if err != nil {
		return nil, err
	}
	if err := r.describeDevice(); err != nil {
		return nil, err
	}
	sh := db.StaticHash(l.Kernel.Name, ir.Bitcode)
	k := &db.Kernel{
		StaticHash:    sh,
		VAddr:         db.FormatVAddr(r.cfg.VABase),
		VASize:        r.reservation(),
		KernelName:    l.Kernel.Name,
		DemangledName: l.Kernel.Demangled,
		Modules:       []string{db.IRFileName(sh)},
		Device:        *r.device,
		Toolchain:     r.toolchain,
		FormatVersion: db.FormatVersion,
		Instances:     map[string]*db.Instance{},
	}
	k.ArgNames, k.ArgKinds, k.ArgSizes, k.Specializations = names, kinds, sizes, specs
	if r.cfg.Rank != nil {
		rank := *r.cfg.Rank
		k.Rank = &rank
	}
	if err := db.ReplaceFile(filepath.Join(r.cfg.DB, db.IRFileName(sh)), ir.Bitcode); err != nil {
		return nil, err
	}
	k.DeviceCode = r.saveDeviceCode(l.Kernel)
	k.CompileFlags = ir.Flags
	return k, nil
}

// describeDevice learns the GPU and the toolchain a kernel file names, once.
func (r *Recorder) describeDevice() error {
	if r.device != nil {
		return nil
	}
	dev, err := r.proc.Device()
	if err != nil {
		return fmt.Errorf("describe the GPU: %w", err)
	}
	r.device = &dev
	r.toolchain = r.proc.Toolchain()
	return nil
}

// saveDeviceCode writes the fat binary that registered the kernel into the
// database, once per distinct image, and returns its file name; "" when the
// process cannot provide it (the recording is still complete: replay then
// recompiles its baseline).
func (r *Recorder) saveDeviceCode(k Kernel) string {
	dc, ok := r.proc.(DeviceCoder)
	if !ok {
		return ""
	}
	code, err := dc.DeviceCode(k.Module)
	if err != nil || len(code) == 0 {
		r.reportError(fmt.Sprintf("kernel %s: its device code is not recorded (%v); replay will recompile the baseline from IR", k.Name, err))
		return ""
	}
	name, err := r.writeDeviceCode(code)
	if err != nil {
		r.reportError(fmt.Sprintf("kernel %s: writing its device code: %v", k.Name, err))
		return ""
	}
	return name
}

// writeDeviceCode writes a module image into the database once, under the
// name its contents give it.
func (r *Recorder) writeDeviceCode(code []byte) (string, error) {
	name := db.DeviceCodeFileName(code)
	path := filepath.Join(r.cfg.DB, name)
	if _, err := os.Stat(path); err == nil {
		return name, nil
	}
	if err := db.ReplaceFile(path, code); err != nil {
		return "", err
	}
	return name, nil
}

// argMeta names and classifies a kernel's arguments. The launch's parameter
// sizes (cuFuncGetParamInfo) are the truth: a kind from the IR that
// disagrees with its size (bool as i1, a struct) is kept as raw bytes
// (byval:N). Without kinds (IR not yet analyzed, see Finalize) every
// argument is raw bytes, which replay restores as is.
func argMeta(ir *KernelIR, sizes []uint64) (names []string, kinds []mneme.ArgKind, specs []bool, err error) {
	if len(ir.ArgKinds) != 0 && len(ir.ArgKinds) != len(sizes) {
		return nil, nil, nil, fmt.Errorf("its IR has %d parameters but the launch passes %d", len(ir.ArgKinds), len(sizes))
	}
	for i, size := range sizes {
		kind := mneme.ArgByVal(size)
		if i < len(ir.ArgKinds) && ir.ArgKinds[i].Size() == size {
			kind = ir.ArgKinds[i]
		}
		name := fmt.Sprintf("arg%d", i)
		if i < len(ir.ArgNames) && ir.ArgNames[i] != "" {
			name = ir.ArgNames[i]
		}
		names = append(names, name)
		kinds = append(kinds, kind)
		specs = append(specs, kind.Specializable())
	}
	return names, kinds, specs, nil
}

// liveBytes is the device memory the application holds in the arena.
func (r *Recorder) liveBytes() uint64 {
	var n uint64
	for _, b := range r.live() {
		n += b.Size
	}
	return n
}
