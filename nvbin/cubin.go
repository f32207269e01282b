package nvbin

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
)

// Param is one kernel parameter as the cubin lays it out in the launch's
// parameter buffer: what cuFuncGetParamInfo reports, read without a GPU.
type Param struct {
	Ordinal int
	Offset  int
	Size    int
}

// Kernel is an entry function of a cubin.
type Kernel struct {
	Name string // mangled
	// Params are ordered by ordinal; nil when the cubin has no parameter
	// information for the kernel.
	Params []Param
	// ParamBytes is the size of the parameter buffer (EIATTR_CBANK_PARAM_SIZE),
	// 0 when absent.
	ParamBytes int
	// MaxThreads is the kernel's launch bound (EIATTR_MAX_THREADS, which
	// ptxas writes for __launch_bounds__ or .maxntid): the product of its
	// x, y and z; a block of more threads cannot launch. 0 when absent or
	// beyond CUDA's 1024 threads per block.
	MaxThreads int
}

// Variable is a device variable a cubin defines: a __device__ global
// (section .nv.global or .nv.global.init) or a __constant__ one (a
// .nv.constantN section other than bank 0, which holds kernel parameters).
type Variable struct {
	Name     string // the symbol: mangled, as cuModuleGetGlobal takes it
	Size     uint64
	Constant bool
	// Managed: a __managed__ variable (STO_CUDA_MANAGED in the symbol's
	// st_other, as cuda-gdb reads it): the driver places it in managed
	// memory.
	Managed bool
}

// stoCUDAManaged is the st_other bit of a __managed__ variable's symbol.
const stoCUDAManaged = 0x4

// Cubin is what recording and replay need of a cubin.
type Cubin struct {
	// Arch is the cubin's target (90 for sm_90), from the ELF flags.
	Arch      int
	Kernels   []Kernel
	Variables []Variable
}

// ELF identification of a CUDA cubin: 64-bit little-endian, machine EM_CUDA.
const emCUDA = 190

// .nv.info attribute records: a format byte, an attribute byte, then a u16
// that is the value (formats 1-3) or the size of the data that follows
// (format 4, EIFMT_SVAL).
const (
	eifmtSVAL           = 4
	eiattrMaxThreads    = 0x05 // x, y, z u32: the launch bound
	eiattrKParamInfo    = 0x17 // index u32, ordinal u16, offset u16, flags u32 (size in bits 18..31)
	eiattrCBankParamSiz = 0x19 // u16 value: bytes of the parameter buffer
)

// maxThreadsPerBlock is CUDA's limit on a block's threads.
const maxThreadsPerBlock = 1024

// MaxCubin bounds the cubin a reader accepts.
const MaxCubin = 1 << 30

func cubinErr(off int, field, format string, args ...any) error {
	return &FormatError{What: "cubin", Offset: off, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// ParseCubin reads a cubin's kernels and their parameter layouts.
func ParseCubin(data []byte) (c *Cubin, err error) {
	if len(data) > MaxCubin {
		return nil, cubinErr(0, "size", "%d bytes is more than %d", len(data), MaxCubin)
	}
	if len(data) < 64 || !bytes.HasPrefix(data, []byte(elf.ELFMAG)) {
		return nil, cubinErr(0, "magic", "not an ELF file")
	}
	// debug/elf has panicked on hostile inputs in past Go releases; a
	// malformed cubin must be an error, never a crash of the recorder.
	defer func() {
		if r := recover(); r != nil {
			c, err = nil, cubinErr(0, "ELF", "malformed: %v", r)
		}
	}()
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil, cubinErr(0, "ELF", "%v", err)
	}
	if f.Class != elf.ELFCLASS64 || f.Data != elf.ELFDATA2LSB || f.Machine != emCUDA {
		return nil, cubinErr(18, "e_machine", "%v %v machine %d, want a 64-bit little-endian EM_CUDA (190) file", f.Class, f.Data, f.Machine)
	}
	c = &Cubin{Arch: cubinArch(binary.LittleEndian.Uint32(data[48:]))}
	syms, err := f.Symbols()
	if err != nil && len(syms) == 0 {
		return nil, cubinErr(0, ".symtab", "%v", err)
	}
	// Entry functions are the global FUNC symbols with an .nv.info.<name>
	// section (device functions have none).
	info := map[string]*elf.Section{}
	for _, s := range f.Sections {
		if name, ok := strings.CutPrefix(s.Name, ".nv.info."); ok {
			info[name] = s
		}
	}
	seen := map[string]bool{}
	for _, s := range syms {
		if v, ok := variable(f, s); ok && !seen[s.Name] {
			seen[s.Name] = true
			c.Variables = append(c.Variables, v)
			continue
		}
		if elf.ST_TYPE(s.Info) != elf.STT_FUNC || elf.ST_BIND(s.Info) == elf.STB_LOCAL || seen[s.Name] {
			continue
		}
		sec := info[s.Name]
		if sec == nil {
			continue
		}
		seen[s.Name] = true
		k := Kernel{Name: s.Name}
		b, err := sec.Data()
		if err != nil {
			return nil, cubinErr(int(sec.Offset), sec.Name, "%v", err)
		}
		if err := parseInfo(b, int(sec.Offset), &k); err != nil {
			return nil, err
		}
		c.Kernels = append(c.Kernels, k)
	}
	sort.Slice(c.Kernels, func(i, j int) bool { return c.Kernels[i].Name < c.Kernels[j].Name })
	sort.Slice(c.Variables, func(i, j int) bool { return c.Variables[i].Name < c.Variables[j].Name })
	return c, nil
}

// variable reports whether symbol s is a device variable the application
// can set: an object in a global or user-constant section, of either
// binding: nvcc's whole-program cubins bind a program's __device__
// variables locally (measured, CUDA 13.0), and the driver still finds them
// by name. A local object the driver does not find (a string of printf) is
// left out by whoever asks the driver.
func variable(f *elf.File, s elf.Symbol) (Variable, bool) {
	if elf.ST_TYPE(s.Info) != elf.STT_OBJECT || s.Size == 0 || s.Name == "" {
		return Variable{}, false
	}
	if int(s.Section) <= 0 || int(s.Section) >= len(f.Sections) {
		return Variable{}, false
	}
	sec := f.Sections[s.Section].Name
	switch {
	case sec == ".nv.global" || strings.HasPrefix(sec, ".nv.global."):
		return Variable{Name: s.Name, Size: s.Size, Managed: s.Other&stoCUDAManaged != 0}, true
	case strings.HasPrefix(sec, ".nv.constant") && !strings.HasPrefix(sec, ".nv.constant0"):
		return Variable{Name: s.Name, Size: s.Size, Constant: true}, true
	}
	return Variable{}, false
}

// cubinArch reads the SM version from e_flags (EF_CUDA_SM: bits 8..15 in
// the cubins of CUDA 12 and 13, measured 0x06005a04 for sm_90; the low byte
// in older layouts); 0 when unknown.
func cubinArch(flags uint32) int {
	if a := int(flags>>8) & 0xff; a >= 30 && a < 200 {
		return a
	}
	if a := int(flags & 0xff); a >= 30 && a < 200 {
		return a
	}
	return 0
}

// parseInfo reads one kernel's .nv.info section.
func parseInfo(b []byte, base int, k *Kernel) error {
	byOrdinal := map[int]Param{}
	for p := 0; p < len(b); {
		if len(b)-p < 4 {
			return cubinErr(base+p, ".nv.info."+k.Name, "truncated attribute record (%d bytes left)", len(b)-p)
		}
		format, attr := b[p], b[p+1]
		v := int(binary.LittleEndian.Uint16(b[p+2:]))
		p += 4
		if format != eifmtSVAL {
			if attr == eiattrCBankParamSiz {
				k.ParamBytes = v
			}
			continue
		}
		if v > len(b)-p {
			return cubinErr(base+p-2, ".nv.info."+k.Name, "attribute 0x%02x of %d bytes overruns the section (%d left)", attr, v, len(b)-p)
		}
		data := b[p : p+v]
		p += v
		if attr == eiattrMaxThreads && len(data) == 12 {
			k.MaxThreads = launchBound(data)
			continue
		}
		if attr != eiattrKParamInfo {
			continue
		}
		if len(data) < 12 {
			return cubinErr(base+p-v, ".nv.info."+k.Name, "parameter record of %d bytes, want 12", len(data))
		}
		prm := Param{
			Ordinal: int(binary.LittleEndian.Uint16(data[4:])),
			Offset:  int(binary.LittleEndian.Uint16(data[6:])),
			Size:    int(binary.LittleEndian.Uint32(data[8:])>>18) & 0x3fff,
		}
		if old, dup := byOrdinal[prm.Ordinal]; dup && old != prm {
			return cubinErr(base+p-v, ".nv.info."+k.Name, "parameter %d described twice differently", prm.Ordinal)
		}
		byOrdinal[prm.Ordinal] = prm
	}
	for i := range len(byOrdinal) {
		prm, ok := byOrdinal[i]
		if !ok {
			return cubinErr(base, ".nv.info."+k.Name, "parameters are not numbered 0..%d (%d missing)", len(byOrdinal)-1, i)
		}
		if k.ParamBytes != 0 && prm.Offset+prm.Size > k.ParamBytes {
			return cubinErr(base, ".nv.info."+k.Name, "parameter %d (offset %d, %d bytes) lies past the %d-byte parameter buffer", i, prm.Offset, prm.Size, k.ParamBytes)
		}
		k.Params = append(k.Params, prm)
	}
	return nil
}

// launchBound is the thread count of an EIATTR_MAX_THREADS record (x, y,
// z); 0 when a dimension is 0 or the product exceeds CUDA's limit.
func launchBound(data []byte) int {
	n := 1
	for i := range 3 {
		d := int(binary.LittleEndian.Uint32(data[4*i:]))
		if d < 1 || d > maxThreadsPerBlock {
			return 0
		}
		n *= d
	}
	if n > maxThreadsPerBlock {
		return 0
	}
	return n
}

// Kernel finds a kernel by mangled name.
func (c *Cubin) Kernel(name string) (Kernel, bool) {
	for _, k := range c.Kernels {
		if k.Name == name {
			return k, true
		}
	}
	return Kernel{}, false
}
