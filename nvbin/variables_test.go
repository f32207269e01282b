package nvbin

import (
	"encoding/binary"
	"reflect"
	"testing"
)

// elfSection is one section of a synthetic cubin.
type elfSection struct {
	name    string
	typ     uint32
	data    []byte
	size    uint64 // for NOBITS
	link    uint32
	info    uint32
	entsize uint64
}

// elfSymbol is one symbol: bind and typ as in st_info.
type elfSymbol struct {
	name      string
	bind, typ byte
	other     byte // st_other
	section   uint16
	size      uint64
}

// syntheticCubin lays out a 64-bit EM_CUDA ELF file with the given
// sections (after the null section, .shstrtab, .strtab and .symtab) and
// symbols, as nvcc's cubins are laid out, for what no real cubin in
// testdata holds.
func syntheticCubin(extra []elfSection, syms []elfSymbol) []byte {
	le := binary.LittleEndian
	strtab := []byte{0}
	symtab := make([]byte, 24) // the null symbol
	firstGlobal := uint32(len(syms) + 1)
	for i, s := range syms {
		if s.bind != 0 && uint32(i+1) < firstGlobal {
			firstGlobal = uint32(i + 1)
		}
		e := make([]byte, 24)
		le.PutUint32(e[0:], uint32(len(strtab)))
		strtab = append(append(strtab, s.name...), 0)
		e[4] = s.bind<<4 | s.typ
		e[5] = s.other
		le.PutUint16(e[6:], s.section)
		le.PutUint64(e[16:], s.size)
		symtab = append(symtab, e...)
	}
	secs := append([]elfSection{
		{name: ".shstrtab", typ: 3},
		{name: ".strtab", typ: 3, data: strtab},
		{name: ".symtab", typ: 2, data: symtab, link: 2, info: firstGlobal, entsize: 24},
	}, extra...)
	shstr := []byte{0}
	nameOff := make([]uint32, len(secs))
	for i, s := range secs {
		nameOff[i] = uint32(len(shstr))
		shstr = append(append(shstr, s.name...), 0)
	}
	secs[0].data = shstr
	out := make([]byte, 64)
	offs := make([]uint64, len(secs))
	for i, s := range secs {
		for len(out)%8 != 0 {
			out = append(out, 0)
		}
		offs[i] = uint64(len(out))
		out = append(out, s.data...)
	}
	for len(out)%8 != 0 {
		out = append(out, 0)
	}
	shoff := uint64(len(out))
	out = append(out, make([]byte, 64)...) // the null section header
	for i, s := range secs {
		h := make([]byte, 64)
		le.PutUint32(h[0:], nameOff[i])
		le.PutUint32(h[4:], s.typ)
		le.PutUint64(h[24:], offs[i])
		size := uint64(len(s.data))
		if s.typ == 8 { // NOBITS
			size = s.size
		}
		le.PutUint64(h[32:], size)
		le.PutUint32(h[40:], s.link)
		le.PutUint32(h[44:], s.info)
		le.PutUint64(h[48:], 1)
		le.PutUint64(h[56:], s.entsize)
		out = append(out, h...)
	}
	copy(out, []byte{0x7f, 'E', 'L', 'F', 2, 1, 1, 0x41, 8})
	le.PutUint16(out[16:], 2)          // ET_EXEC
	le.PutUint16(out[18:], emCUDA)     // EM_CUDA
	le.PutUint32(out[20:], 1)          // EV_CURRENT
	le.PutUint64(out[40:], shoff)      // e_shoff
	le.PutUint32(out[48:], 0x06005a04) // e_flags: sm_90
	le.PutUint16(out[52:], 64)         // e_ehsize
	le.PutUint16(out[58:], 64)         // e_shentsize
	le.PutUint16(out[60:], uint16(len(secs)+1))
	le.PutUint16(out[62:], 1) // e_shstrndx
	return out
}

// variablesCubin is a cubin with one kernel and device variables of every
// kind nvcc emits, and symbols that are not variables.
func variablesCubin() []byte {
	// .nv.info.k: one 8-byte parameter at offset 0, an 8-byte buffer.
	info := []byte{4, 0x17, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 8 << 2, 0, 3, 0x19, 8, 0}
	sections := []elfSection{
		{name: ".nv.info.k", typ: 0x70000000, data: info},        // 4
		{name: ".text.k", typ: 1, data: make([]byte, 16)},        // 5
		{name: ".nv.global", typ: 8, size: 32},                   // 6
		{name: ".nv.constant3", typ: 1, data: make([]byte, 64)},  // 7
		{name: ".nv.constant0.k", typ: 1, data: make([]byte, 8)}, // 8
		{name: ".nv.global.init", typ: 1, data: make([]byte, 8)}, // 9
		{name: ".nv.shared.k", typ: 8, size: 128},                // 10
	}
	const local, global, object, function = 0, 1, 1, 2
	syms := []elfSymbol{
		{name: "scratch", bind: local, typ: object, section: 6, size: 4},
		{name: "k", bind: global, typ: function, section: 5, size: 16},
		{name: "counter", bind: global, typ: object, section: 6, size: 16},
		{name: "_ZL5table", bind: global, typ: object, section: 7, size: 64},
		{name: "params", bind: global, typ: object, section: 8, size: 8},
		{name: "seed", bind: global, typ: object, section: 9, size: 8},
		{name: "tile", bind: global, typ: object, section: 10, size: 128},
		{name: "empty", bind: global, typ: object, section: 6, size: 0},
		{name: "tally", bind: global, typ: object, other: 0x24, section: 6, size: 4}, // STO_CUDA_GLOBAL|STO_CUDA_MANAGED
	}
	return syntheticCubin(sections, syms)
}

func TestCubinVariables(t *testing.T) {
	c, err := ParseCubin(variablesCubin())
	if err != nil {
		t.Fatal(err)
	}
	want := []Variable{{Name: "_ZL5table", Size: 64, Constant: true}, {Name: "counter", Size: 16}, {Name: "scratch", Size: 4}, {Name: "seed", Size: 8}, {Name: "tally", Size: 4, Managed: true}}
	if !reflect.DeepEqual(c.Variables, want) {
		t.Errorf("variables %+v, want %+v", c.Variables, want)
	}
	if len(c.Kernels) != 1 || c.Kernels[0].Name != "k" || len(c.Kernels[0].Params) != 1 || c.Kernels[0].Params[0].Size != 8 {
		t.Errorf("kernels %+v", c.Kernels)
	}
	if c.Arch != 90 {
		t.Errorf("arch %d", c.Arch)
	}
}

func TestRealCubinHasNoVariables(t *testing.T) {
	c, err := ParseCubin(readTestdata(t, "vecadd.sm_90.cubin"))
	if err != nil || len(c.Variables) != 0 {
		t.Errorf("vector add cubin: variables %+v, %v; want none", c.Variables, err)
	}
}

// nvcc's whole-program cubin binds the program's __device__ variables
// locally: they are variables all the same (recording skipped them, and
// devglobal's replay read zeros for its scale factor).
func TestWholeProgramCubinLocalVariables(t *testing.T) {
	c, err := ParseCubin(readTestdata(t, "devglobal.sm_90.cubin"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Variable{{Name: "above_threshold", Size: 4}, {Name: "scale_factor", Size: 4}}
	if !reflect.DeepEqual(c.Variables, want) {
		t.Errorf("variables %+v, want %+v", c.Variables, want)
	}
}
