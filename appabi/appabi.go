// Package appabi is the contract between the compiler wrapper, the C shim
// linked into applications and the Go runtime library: which CUDA symbols are
// intercepted at link time, and how each translation unit's device IR is
// embedded in its object file. It is plain Go so the wrapper and the tests can
// use it without cgo; the shim (cmd/mneme-rt/shim) and the library (cmd/mneme-rt)
// implement the other side.
package appabi

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// WrappedSymbols are the CUDA runtime entry points routed through the shim's
// __wrap_* functions with the linker's --wrap option.
var WrappedSymbols = []string{
	"__cudaRegisterFatBinary",
	"__cudaRegisterFatBinaryEnd",
	"__cudaUnregisterFatBinary",
	"__cudaRegisterFunction",
	"__cudaRegisterVar",
	"__cudaRegisterManagedVar",
	"cudaLaunchKernel",
	"cudaLaunchKernel_ptsz",
	"cudaMalloc",
	"cudaMallocPitch",
	"cudaMalloc3D",
	"cudaMallocAsync",
	"cudaMallocAsync_ptsz",
	"cudaMallocManaged",
	"cudaFree",
	"cudaFreeAsync",
	"cudaFreeAsync_ptsz",
	"cudaDeviceReset",
	// The device an application chooses: deploying, the tuned kernels'
	// library starts loading then, beside the application's own start.
	"cudaSetDevice",
}

// WrapLinkFlag is the linker option that routes WrappedSymbols through the shim.
func WrapLinkFlag() string {
	var b bytes.Buffer
	b.WriteString("-Wl")
	for _, s := range WrappedSymbols {
		b.WriteString(",--wrap=")
		b.WriteString(s)
	}
	return b.String()
}

// IRSection is the ELF section that holds embedded device IR. Its name is a C
// identifier so the linker defines __start_mneme_ir and __stop_mneme_ir, which
// the shim uses to find every entry of the linked program.
const IRSection = "mneme_ir"

// irMagic starts every entry so a reader can resynchronize and reject
// garbage. Version 2 entries also carry the compile flags that shape device
// code; version 1 entries (older builds) are still read.
var (
	irMagic   = [8]byte{'M', 'N', 'E', 'M', 'E', 'I', 'R', '2'}
	irMagicV1 = [8]byte{'M', 'N', 'E', 'M', 'E', 'I', 'R', '1'}
)

const irHeaderSize = 8 + 8 + 8 // magic, name length, bitcode length (+ flags length in v2)

// IREntry is one translation unit's device bitcode.
type IREntry struct {
	Name    string // the source file it came from
	Bitcode []byte
	// Flags are the options of the application's compile that change its
	// device code but that the bitcode cannot tell (the -O level, ptxas
	// options), as given on its command line.
	Flags []string
}

// EncodeIREntry lays out one entry: magic, u64 name length, u64 bitcode
// length, u64 flags length (little-endian), name, bitcode, the flags joined
// by NUL, zero padding to 8 bytes, so entries concatenated by the linker stay
// aligned and parseable.
func EncodeIREntry(e IREntry) []byte {
	flags := strings.Join(e.Flags, "\x00")
	n := irHeaderSize + 8 + len(e.Name) + len(e.Bitcode) + len(flags)
	pad := (8 - n%8) % 8
	out := make([]byte, 0, n+pad)
	out = append(out, irMagic[:]...)
	out = binary.LittleEndian.AppendUint64(out, uint64(len(e.Name)))
	out = binary.LittleEndian.AppendUint64(out, uint64(len(e.Bitcode)))
	out = binary.LittleEndian.AppendUint64(out, uint64(len(flags)))
	out = append(out, e.Name...)
	out = append(out, e.Bitcode...)
	out = append(out, flags...)
	return append(out, make([]byte, pad)...)
}

// ErrBadIRSection reports a section that does not hold well-formed entries.
var ErrBadIRSection = errors.New("malformed mneme_ir section")

// DecodeIRSection parses the concatenation of entries found between
// __start_mneme_ir and __stop_mneme_ir. Zero padding between entries (which a
// linker may add for alignment) is skipped.
func DecodeIRSection(sec []byte) ([]IREntry, error) {
	var out []IREntry
	off := 0
	for off < len(sec) {
		if sec[off] == 0 {
			off++
			continue
		}
		header := irHeaderSize
		v2 := len(sec)-off >= irHeaderSize+8 && bytes.Equal(sec[off:off+8], irMagic[:])
		if v2 {
			header += 8
		} else if len(sec)-off < irHeaderSize || !bytes.Equal(sec[off:off+8], irMagicV1[:]) {
			return out, fmt.Errorf("%w: no entry header at offset %d", ErrBadIRSection, off)
		}
		nameLen := binary.LittleEndian.Uint64(sec[off+8:])
		bcLen := binary.LittleEndian.Uint64(sec[off+16:])
		var flagsLen uint64
		if v2 {
			flagsLen = binary.LittleEndian.Uint64(sec[off+24:])
		}
		body := uint64(len(sec) - off - header)
		if nameLen > body || bcLen > body-nameLen || flagsLen > body-nameLen-bcLen {
			return out, fmt.Errorf("%w: entry at offset %d claims %d+%d+%d bytes, %d remain", ErrBadIRSection, off, nameLen, bcLen, flagsLen, body)
		}
		start := off + header
		name := string(sec[start : start+int(nameLen)])
		bc := sec[start+int(nameLen) : start+int(nameLen)+int(bcLen)]
		e := IREntry{Name: name, Bitcode: bc}
		if flags := string(sec[start+int(nameLen)+int(bcLen) : start+int(nameLen)+int(bcLen)+int(flagsLen)]); flags != "" {
			e.Flags = strings.Split(flags, "\x00")
		}
		out = append(out, e)
		off = start + int(nameLen) + int(bcLen) + int(flagsLen)
	}
	return out, nil
}
