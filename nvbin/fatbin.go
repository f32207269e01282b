// Package nvbin reads the device code that NVIDIA's compilers put into
// executables: fat-binary containers (the .nv_fatbin section an nvcc build
// registers with the CUDA runtime), the cubins (ELF) and PTX they hold, and
// each kernel's parameter layout from a cubin's .nv.info sections. It is
// plain Go: recording an nvcc-built application captures these images, and
// replay, tuning and inspect read them without a GPU. Every reader bounds
// what it reads by the input and reports the offset and field it rejects;
// the formats are NVIDIA's, undocumented, and described where they are read.
package nvbin

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
)

// Fat-binary layout (little-endian), as nvcc 11-13 write it:
//
//	container header, 16 bytes: magic u32 = 0xBA55ED50, version u16 = 1,
//	  header size u16 (16), payload size u64 (the entries that follow)
//	entry header, ≥ 64 bytes: kind u16 (1 PTX, 2 cubin), version u16,
//	  header size u32, payload size u64, compressed size u32, u32,
//	  minor u16, major u16, arch u32 (90 for sm_90), name offset u32,
//	  name size u32, flags u64, u64, uncompressed size u64; then the
//	  payload (padded), then the next entry.
//
// The executable's .nv_fatbin section is several containers one after the
// other (one per translation unit, each 8-byte aligned).
const (
	// FatbinMagic starts every fat-binary container.
	FatbinMagic = 0xBA55ED50
	// WrapperMagic starts the __fatBinC_Wrapper_t the CUDA runtime passes to
	// cuLibraryLoadData / __cudaRegisterFatBinary, which points at a container.
	WrapperMagic = 0x466243B1

	containerHeaderSize = 16
	entryHeaderMin      = 64

	flagCompressedLZ4  = 0x2000
	flagCompressedZstd = 0x8000
)

// MaxDecompressed bounds the uncompressed size of one entry: a hostile
// header cannot make a reader allocate more (the largest cubins of CUDA's own
// libraries are tens of MiB).
const MaxDecompressed = 1 << 30

// Kind is what an entry holds.
type Kind uint16

const (
	KindPTX   Kind = 1
	KindCubin Kind = 2
)

func (k Kind) String() string {
	switch k {
	case KindPTX:
		return "ptx"
	case KindCubin:
		return "cubin"
	}
	return fmt.Sprintf("kind %d", uint16(k))
}

// Entry is one image in a container.
type Entry struct {
	Kind Kind
	// Arch is the GPU architecture as nvcc numbers it: 90 for sm_90 (a
	// cubin's target, or the virtual architecture of PTX, compute_90).
	Arch int
	// Version is the entry's format version (PTX ISA major.minor for PTX).
	Major, Minor int
	Flags        uint64
	// Offset is where the entry's header starts in the parsed bytes.
	Offset int
	// Size is the payload's uncompressed size.
	Size uint64

	payload []byte // as stored (compressed when Flags says so)
}

// Compressed reports whether the payload is stored compressed.
func (e *Entry) Compressed() bool { return e.Flags&(flagCompressedLZ4|flagCompressedZstd) != 0 }

// Data returns the entry's image, decompressed.
func (e *Entry) Data() ([]byte, error) {
	switch {
	case e.Flags&flagCompressedZstd != 0:
		return decodeZstd(e.payload, e.Size, e.Offset)
	case e.Flags&flagCompressedLZ4 != 0:
		return decodeLZ4(e.payload, e.Size, e.Offset)
	}
	return e.payload, nil
}

// Container is one fat binary.
type Container struct {
	Offset  int // of its header in the parsed bytes
	Size    int // header and payload
	Entries []*Entry
}

// FormatError is a malformed fat binary, cubin or PTX: Offset and Field say
// where.
type FormatError struct {
	What   string // "fat binary", "cubin", "PTX"
	Offset int
	Field  string
	Msg    string
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("%s: %s at byte %d: %s", e.What, e.Field, e.Offset, e.Msg)
}

// ErrNotFatbin: the bytes do not start with a fat-binary container.
var ErrNotFatbin = errors.New("not a fat binary (no 0xBA55ED50 magic)")

func fatErr(off int, field, format string, args ...any) error {
	return &FormatError{What: "fat binary", Offset: off, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// ContainerSize reads the size of the container starting at data[0] from
// its header alone: what an interceptor that holds only a pointer into the
// application's memory must copy.
func ContainerSize(header []byte) (int, error) {
	if len(header) < containerHeaderSize {
		return 0, fatErr(0, "header", "%d bytes, want %d", len(header), containerHeaderSize)
	}
	if binary.LittleEndian.Uint32(header) != FatbinMagic {
		return 0, ErrNotFatbin
	}
	hs := int(binary.LittleEndian.Uint16(header[6:]))
	if hs < containerHeaderSize {
		return 0, fatErr(6, "header size", "%d, want at least %d", hs, containerHeaderSize)
	}
	fat := binary.LittleEndian.Uint64(header[8:])
	if fat > MaxDecompressed {
		return 0, fatErr(8, "payload size", "%d bytes is more than the %d a container may hold", fat, MaxDecompressed)
	}
	return hs + int(fat), nil
}

// ParseFatbin reads every container in data (a .nv_fatbin section, or one
// container). Trailing zero padding is allowed; anything else is an error.
func ParseFatbin(data []byte) ([]*Container, error) {
	if len(data) < 4 || binary.LittleEndian.Uint32(data) != FatbinMagic {
		return nil, ErrNotFatbin
	}
	var out []*Container
	off := 0
	for off < len(data) {
		if allZero(data[off:]) {
			break
		}
		c, err := parseContainer(data, off)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
		off += c.Size
		for off < len(data) && off%8 != 0 && data[off] == 0 {
			off++
		}
	}
	return out, nil
}

func parseContainer(data []byte, off int) (*Container, error) {
	rest := data[off:]
	size, err := ContainerSize(rest)
	if errors.Is(err, ErrNotFatbin) {
		return nil, fatErr(off, "magic", "0x%08x, want 0x%08x", binary.LittleEndian.Uint32(rest), FatbinMagic)
	}
	if err != nil {
		var fe *FormatError
		if errors.As(err, &fe) {
			fe.Offset += off
		}
		return nil, err
	}
	if size > len(rest) {
		return nil, fatErr(off+8, "payload size", "the container needs %d bytes and only %d remain (truncated)", size, len(rest))
	}
	c := &Container{Offset: off, Size: size}
	hs := int(binary.LittleEndian.Uint16(rest[6:]))
	p := hs
	for p < size {
		e, next, err := parseEntry(rest[:size], p)
		if err != nil {
			var fe *FormatError
			if errors.As(err, &fe) {
				fe.Offset += off
			}
			return nil, err
		}
		e.Offset += off
		c.Entries = append(c.Entries, e)
		p = next
	}
	return c, nil
}

// parseEntry reads the entry at c[p:] and returns where the next begins.
func parseEntry(c []byte, p int) (*Entry, int, error) {
	if len(c)-p < entryHeaderMin {
		return nil, 0, fatErr(p, "entry header", "%d bytes left, an entry header needs %d", len(c)-p, entryHeaderMin)
	}
	h := c[p:]
	le := binary.LittleEndian
	hs := le.Uint32(h[4:])
	if hs < entryHeaderMin || uint64(hs) > uint64(len(h)) {
		return nil, 0, fatErr(p+4, "entry header size", "%d, want %d..%d", hs, entryHeaderMin, len(h))
	}
	size := le.Uint64(h[8:])
	if size > uint64(len(h)-int(hs)) {
		return nil, 0, fatErr(p+8, "entry payload size", "%d bytes and only %d remain in the container", size, len(h)-int(hs))
	}
	e := &Entry{
		Kind:   Kind(le.Uint16(h[0:])),
		Minor:  int(le.Uint16(h[24:])),
		Major:  int(le.Uint16(h[26:])),
		Arch:   int(le.Uint32(h[28:])),
		Flags:  le.Uint64(h[40:]),
		Offset: p,
	}
	stored := size
	if cs := uint64(le.Uint32(h[16:])); cs != 0 && e.Compressed() {
		if cs > size {
			return nil, 0, fatErr(p+16, "compressed size", "%d is more than the payload's %d bytes", cs, size)
		}
		stored = cs
	}
	start := p + int(hs)
	e.payload = c[start : start+int(stored)]
	e.Size = size
	if e.Compressed() {
		e.Size = le.Uint64(h[56:])
		if e.Size > MaxDecompressed {
			return nil, 0, fatErr(p+56, "uncompressed size", "%d bytes is more than %d", e.Size, MaxDecompressed)
		}
	}
	return e, start + int(size), nil
}

// zstdMinLimit is the least memory bound a zstd entry is decoded under.
const zstdMinLimit = 64 << 10

func decodeZstd(in []byte, size uint64, off int) ([]byte, error) {
	// The bound is the header's size, but never below zstdMinLimit: a frame
	// of less than 1 KiB (a small kernel's PTX) still declares zstd's
	// smallest window, 1 KiB, which a bound of its own size refuses. The
	// decoded length is checked against the header below.
	d, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(max(size, zstdMinLimit)), zstd.WithDecoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	out, err := d.DecodeAll(in, make([]byte, 0, min(size, 64<<20)))
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		return nil, fatErr(off+56, "uncompressed size", "the header says %d bytes, the payload holds more", size)
	}
	if err != nil {
		return nil, fatErr(off, "zstd payload", "%v", err)
	}
	if uint64(len(out)) != size {
		return nil, fatErr(off+56, "uncompressed size", "the header says %d bytes, the payload holds %d", size, len(out))
	}
	return out, nil
}

// decodeLZ4 decodes an LZ4 block (what nvcc before CUDA 12.8 compressed
// entries with): sequences of a token (literal length, match length),
// literals, and a 2-byte back offset.
func decodeLZ4(in []byte, size uint64, off int) ([]byte, error) {
	out := make([]byte, 0, min(size, 64<<20))
	bad := func(msg string) error { return fatErr(off, "lz4 payload", "%s", msg) }
	i := 0
	readLen := func(n int) (int, error) {
		if n != 15 {
			return n, nil
		}
		for {
			if i >= len(in) {
				return 0, io.ErrUnexpectedEOF
			}
			b := in[i]
			i++
			n += int(b)
			if uint64(n) > size {
				return 0, errors.New("length beyond the uncompressed size")
			}
			if b != 255 {
				return n, nil
			}
		}
	}
	for i < len(in) {
		tok := in[i]
		i++
		lit, err := readLen(int(tok >> 4))
		if err != nil {
			return nil, bad(err.Error())
		}
		if lit > len(in)-i || uint64(len(out)+lit) > size {
			return nil, bad("literals run past the input or the uncompressed size")
		}
		out = append(out, in[i:i+lit]...)
		i += lit
		if i == len(in) {
			break // the last sequence has literals only
		}
		if len(in)-i < 2 {
			return nil, bad("truncated match offset")
		}
		back := int(binary.LittleEndian.Uint16(in[i:]))
		i += 2
		if back == 0 || back > len(out) {
			return nil, bad(fmt.Sprintf("match offset %d outside the %d bytes decoded", back, len(out)))
		}
		ml, err := readLen(int(tok & 15))
		if err != nil {
			return nil, bad(err.Error())
		}
		ml += 4
		if uint64(len(out)+ml) > size {
			return nil, bad("match runs past the uncompressed size")
		}
		from := len(out) - back
		for k := 0; k < ml; k++ { // byte by byte: matches may overlap their output
			out = append(out, out[from+k])
		}
	}
	if uint64(len(out)) != size {
		return nil, fatErr(off+56, "uncompressed size", "the header says %d bytes, the payload holds %d", size, len(out))
	}
	return out, nil
}

func allZero(b []byte) bool { return len(bytes.Trim(b, "\x00")) == 0 }

// Select picks, from the entries of every container, the images a GPU of
// architecture arch (90 for sm_90) runs: the cubins built for it exactly,
// and the PTX of the highest virtual architecture not above it.
func Select(cs []*Container, arch int) (cubins, ptx []*Entry) {
	best := -1
	for _, c := range cs {
		for _, e := range c.Entries {
			switch {
			case e.Kind == KindCubin && e.Arch == arch:
				cubins = append(cubins, e)
			case e.Kind == KindPTX && e.Arch <= arch && e.Arch >= best:
				if e.Arch > best {
					ptx, best = nil, e.Arch
				}
				ptx = append(ptx, e)
			}
		}
	}
	return cubins, ptx
}

// Cubins are the cubins of a module image for a GPU of arch (90 for sm_90):
// a fat binary's that Select picks, or the image itself when it is a cubin
// (an ELF file); none for PTX text or an image that does not parse.
func Cubins(image []byte, arch int) [][]byte {
	if cs, err := ParseFatbin(image); err == nil {
		var out [][]byte
		entries, _ := Select(cs, arch)
		for _, e := range entries {
			if b, err := e.Data(); err == nil {
				out = append(out, b)
			}
		}
		return out
	}
	if bytes.HasPrefix(image, []byte("\x7fELF")) {
		return [][]byte{image}
	}
	return nil
}
