package appabi

import (
	"debug/elf"
	"fmt"
)

// ExecutableIR reads the device IR embedded in an executable or shared
// library (its mneme_ir section). A file without the section has none.
func ExecutableIR(path string) ([]IREntry, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	sec := f.Section(IRSection)
	if sec == nil || sec.Type == elf.SHT_NOBITS {
		return nil, nil
	}
	data, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("%s: section %s: %w", path, IRSection, err)
	}
	entries, err := DecodeIRSection(data)
	if err != nil {
		return entries, fmt.Errorf("%s: %w", path, err)
	}
	return entries, nil
}
