// Package cubintest builds synthetic cubins (64-bit EM_CUDA ELF files laid
// out as nvcc's are) for tests of code that reads them, where no real cubin
// holds what a test needs.
package cubintest

import "encoding/binary"

// Section is one section of a synthetic cubin.
type Section struct {
	Name    string
	Type    uint32
	Data    []byte
	Size    uint64 // for NOBITS
	Link    uint32
	Info    uint32
	EntSize uint64
}

// Symbol is one symbol: Bind and Type as in st_info.
type Symbol struct {
	Name       string
	Bind, Type byte
	Other      byte // st_other
	Section    uint16
	Size       uint64
}

// Build lays out a 64-bit EM_CUDA ELF file for sm_90 with the given
// sections (after the null section, .shstrtab, .strtab and .symtab, so the
// first of them is section 4) and symbols, as nvcc's cubins are laid out.
func Build(extra []Section, syms []Symbol) []byte {
	le := binary.LittleEndian
	strtab := []byte{0}
	symtab := make([]byte, 24) // the null symbol
	firstGlobal := uint32(len(syms) + 1)
	for i, s := range syms {
		if s.Bind != 0 && uint32(i+1) < firstGlobal {
			firstGlobal = uint32(i + 1)
		}
		e := make([]byte, 24)
		le.PutUint32(e[0:], uint32(len(strtab)))
		strtab = append(append(strtab, s.Name...), 0)
		e[4] = s.Bind<<4 | s.Type
		e[5] = s.Other
		le.PutUint16(e[6:], s.Section)
		le.PutUint64(e[16:], s.Size)
		symtab = append(symtab, e...)
	}
	secs := append([]Section{
		{Name: ".shstrtab", Type: 3},
		{Name: ".strtab", Type: 3, Data: strtab},
		{Name: ".symtab", Type: 2, Data: symtab, Link: 2, Info: firstGlobal, EntSize: 24},
	}, extra...)
	shstr := []byte{0}
	nameOff := make([]uint32, len(secs))
	for i, s := range secs {
		nameOff[i] = uint32(len(shstr))
		shstr = append(append(shstr, s.Name...), 0)
	}
	secs[0].Data = shstr
	out := make([]byte, 64)
	offs := make([]uint64, len(secs))
	for i, s := range secs {
		for len(out)%8 != 0 {
			out = append(out, 0)
		}
		offs[i] = uint64(len(out))
		out = append(out, s.Data...)
	}
	for len(out)%8 != 0 {
		out = append(out, 0)
	}
	shoff := uint64(len(out))
	out = append(out, make([]byte, 64)...) // the null section header
	for i, s := range secs {
		h := make([]byte, 64)
		le.PutUint32(h[0:], nameOff[i])
		le.PutUint32(h[4:], s.Type)
		le.PutUint64(h[24:], offs[i])
		size := uint64(len(s.Data))
		if s.Type == 8 { // NOBITS
			size = s.Size
		}
		le.PutUint64(h[32:], size)
		le.PutUint32(h[40:], s.Link)
		le.PutUint32(h[44:], s.Info)
		le.PutUint64(h[48:], 1)
		le.PutUint64(h[56:], s.EntSize)
		out = append(out, h...)
	}
	copy(out, []byte{0x7f, 'E', 'L', 'F', 2, 1, 1, 0x41, 8})
	le.PutUint16(out[16:], 2)          // ET_EXEC
	le.PutUint16(out[18:], 190)        // EM_CUDA
	le.PutUint32(out[20:], 1)          // EV_CURRENT
	le.PutUint64(out[40:], shoff)      // e_shoff
	le.PutUint32(out[48:], 0x06005a04) // e_flags: sm_90
	le.PutUint16(out[52:], 64)         // e_ehsize
	le.PutUint16(out[58:], 64)         // e_shentsize
	le.PutUint16(out[60:], uint16(len(secs)+1))
	le.PutUint16(out[62:], 1) // e_shstrndx
	return out
}
