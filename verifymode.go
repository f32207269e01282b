package mneme

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseVerifyMode reads a verification mode as the command line gives it:
// a mode name ("auto", "bitwise", "tolerance", "none", ...), or "ulp N"
// (also "ulp:N" or "ulp=N") for floats within N units in the last place.
// It returns the name and, for ulp, N; which names a command accepts is the
// command's business.
func ParseVerifyMode(text string) (mode string, ulp uint64, err error) {
	s := strings.TrimSpace(text)
	rest, isULP := strings.CutPrefix(s, "ulp")
	if !isULP {
		return s, 0, nil
	}
	rest = strings.TrimLeft(rest, " :=")
	if rest == "" {
		return "", 0, fmt.Errorf("%q: want ulp N, e.g. \"ulp 16\"", text)
	}
	n, err := strconv.ParseUint(rest, 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("%q: want ulp N with N a non-negative integer, e.g. \"ulp 16\"", text)
	}
	return "ulp", n, nil
}
