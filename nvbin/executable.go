package nvbin

import (
	"debug/elf"
	"fmt"
	"io"
	"os"
	"slices"
)

// FatbinSection is the ELF section nvcc puts an executable's fat binaries in.
const FatbinSection = ".nv_fatbin"

// MaxFatbinSection bounds the section ExecutableKernels reads.
const MaxFatbinSection = 1 << 30

// ExecutableKernels lists the kernels (mangled names, sorted, each once)
// of an executable's .nv_fatbin section: those of its cubins, and of its
// PTX for kernels no cubin holds. An executable without the section has
// none (nil, nil).
func ExecutableKernels(path string) ([]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	sec := f.Section(FatbinSection)
	if sec == nil || sec.Type == elf.SHT_NOBITS {
		return nil, nil
	}
	if st, err := os.Stat(path); err == nil && (sec.Offset > uint64(st.Size()) || sec.Size > uint64(st.Size())-sec.Offset) {
		return nil, fmt.Errorf("%s: section %s: %d bytes at offset %d lie past the end of the %d-byte file", path, FatbinSection, sec.Size, sec.Offset, st.Size())
	}
	data, err := io.ReadAll(io.LimitReader(sec.Open(), MaxFatbinSection+1))
	if err != nil {
		return nil, fmt.Errorf("%s: section %s: %w", path, FatbinSection, err)
	}
	if len(data) > MaxFatbinSection {
		return nil, fmt.Errorf("%s: section %s: more than %d bytes", path, FatbinSection, MaxFatbinSection)
	}
	names, err := FatbinKernels(data)
	if err != nil {
		return nil, fmt.Errorf("%s: section %s: %w", path, FatbinSection, err)
	}
	return names, nil
}

// FatbinKernels lists the kernels of fat-binary data (one or more
// containers): its cubins' entry functions and its PTX's entries, sorted,
// each once.
func FatbinKernels(data []byte) ([]string, error) {
	cs, err := ParseFatbin(data)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, c := range cs {
		for _, e := range c.Entries {
			b, err := e.Data()
			if err != nil {
				return nil, err
			}
			switch e.Kind {
			case KindCubin:
				cb, err := ParseCubin(b)
				if err != nil {
					return nil, err
				}
				for _, k := range cb.Kernels {
					seen[k.Name] = true
				}
			case KindPTX:
				es, err := PTXEntries(b)
				if err != nil {
					return nil, err
				}
				for _, k := range es {
					seen[k.Name] = true
				}
			}
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}
