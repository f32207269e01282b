package nvbin

import (
	"bytes"
	"errors"
	"fmt"
)

// EmbeddedPTX finds the PTX of kernel in a module image for a GPU of
// architecture arch (90 for sm_90): the image itself when it is PTX text,
// else the fat binary's PTX of the highest virtual architecture not above
// arch that defines the kernel.
func EmbeddedPTX(image []byte, kernel string, arch int) ([]byte, error) {
	cs, err := ParseFatbin(image)
	if errors.Is(err, ErrNotFatbin) {
		if !bytes.HasPrefix(image, []byte("\x7fELF")) && bytes.Contains(image[:min(len(image), 4096)], []byte(".version")) {
			return bytes.TrimRight(image, "\x00"), nil // PTX text, loaded as such
		}
		return nil, errors.New("the image is a cubin, which embeds no PTX")
	}
	if err != nil {
		return nil, err
	}
	_, entries := Select(cs, arch)
	for _, e := range entries {
		ptx, err := e.Data()
		if err != nil {
			return nil, err
		}
		es, err := PTXEntries(ptx)
		if err != nil {
			return nil, err
		}
		for _, pe := range es {
			if pe.Name == kernel {
				return bytes.TrimRight(ptx, "\x00"), nil // padding; LinkPTX adds the terminator
			}
		}
	}
	return nil, fmt.Errorf("the fat binary embeds no PTX of kernel %s for sm_%d or below (build with -gencode ...,code=compute_XX to keep it)", kernel, arch)
}
