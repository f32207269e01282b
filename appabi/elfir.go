package appabi

import (
	"debug/elf"
	"fmt"
	"io"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/internal/safefile"
)

// ExecutableIR reads the device IR embedded in an executable or shared
// library (its mneme_ir section). A file without the section has none. The
// file must be a regular one (a FIFO would block), and the section is read
// only if its size fits the file and safefile.MaxIR: a crafted section
// header cannot make it allocate what the file does not hold.
func ExecutableIR(path string) ([]IREntry, error) {
	file, fi, err := safefile.Open(path, 0)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	f, err := elf.NewFile(file)
	if err != nil {
		return nil, mneme.BadInput(fmt.Errorf("%s: %w", path, err))
	}
	defer f.Close()
	sec := f.Section(IRSection)
	if sec == nil || sec.Type == elf.SHT_NOBITS {
		return nil, nil
	}
	if sec.Offset > uint64(fi.Size()) || sec.FileSize > uint64(fi.Size())-sec.Offset {
		return nil, mneme.BadInput(fmt.Errorf("%s: section %s: %d bytes at offset %d lie past the end of the %d-byte file", path, IRSection, sec.FileSize, sec.Offset, fi.Size()))
	}
	if sec.Size > safefile.MaxIR {
		return nil, mneme.BadInput(fmt.Errorf("%s: section %s: %d bytes, more than the limit of %d", path, IRSection, sec.Size, int64(safefile.MaxIR)))
	}
	// Read through a limit: a compressed section's declared size is only
	// what its header says.
	data, err := io.ReadAll(io.LimitReader(sec.Open(), safefile.MaxIR+1))
	if err != nil {
		return nil, mneme.BadInput(fmt.Errorf("%s: section %s: %w", path, IRSection, err))
	}
	if len(data) > safefile.MaxIR {
		return nil, mneme.BadInput(fmt.Errorf("%s: section %s: more than the limit of %d bytes", path, IRSection, int64(safefile.MaxIR)))
	}
	entries, err := DecodeIRSection(data)
	if err != nil {
		return entries, fmt.Errorf("%s: %w", path, err)
	}
	return entries, nil
}
