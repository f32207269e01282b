package appabi

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// JITSection is the ELF section listing the kernels annotated for run-time
// specialization (Proteus's __attribute__((annotate("jit", ...)))): the
// shim deploys when it is not empty, without any tuned file.
const JITSection = "mneme_jit"

// JITAnnotation is one annotated kernel: its mangled name and the 1-based
// indices of the arguments to fold in at run time.
type JITAnnotation struct {
	Kernel string
	Args   []int
}

// EncodeJITAnnotation is one line of the section: "jit KERNEL I,J\n". Lines
// of several translation units concatenate into a valid section.
func EncodeJITAnnotation(a JITAnnotation) []byte {
	idx := make([]string, len(a.Args))
	for i, n := range a.Args {
		idx[i] = strconv.Itoa(n)
	}
	return []byte("jit " + a.Kernel + " " + strings.Join(idx, ",") + "\n")
}

// DecodeJITSection reads the annotations of a linked program. A malformed
// line is an error naming it; NUL padding between units is skipped.
func DecodeJITSection(sec []byte) ([]JITAnnotation, error) {
	var out []JITAnnotation
	sc := bufio.NewScanner(bytes.NewReader(bytes.ReplaceAll(sec, []byte{0}, nil)))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		f := strings.Split(text, " ")
		if len(f) < 2 || len(f) > 3 || f[0] != "jit" || f[1] == "" {
			return out, fmt.Errorf("section %s line %d %q: want `jit KERNEL I,J`", JITSection, line, text)
		}
		a := JITAnnotation{Kernel: f[1]}
		if len(f) == 3 && f[2] != "" {
			for _, s := range strings.Split(f[2], ",") {
				n, err := strconv.Atoi(s)
				if err != nil || n < 1 || n > 1<<16 {
					return out, fmt.Errorf("section %s line %d %q: argument index %q is not a 1-based index", JITSection, line, text, s)
				}
				a.Args = append(a.Args, n)
			}
		}
		out = append(out, a)
	}
	return out, sc.Err()
}
