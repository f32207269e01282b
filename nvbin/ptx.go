package nvbin

import (
	"fmt"
	"strconv"
	"strings"
)

// PTXParam is one parameter of a PTX entry as declared:
// `.param .u64 .ptr .align 8 name` or `.param .align 4 .b8 name[12]`.
type PTXParam struct {
	Name  string
	Type  string // "u64", "f32", "b8", ...
	Ptr   bool   // declared .ptr (a pointer the compiler knows of)
	Count int    // array elements, 1 for a scalar
	Size  int    // bytes: the type's width times Count
}

// PTXEntry is a kernel of a PTX module.
type PTXEntry struct {
	Name   string
	Params []PTXParam
}

// MaxPTX bounds the PTX text a reader accepts.
const MaxPTX = 1 << 30

func ptxErr(off int, field, format string, args ...any) error {
	return &FormatError{What: "PTX", Offset: off, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// PTXEntries lists the entry functions (.entry) of a PTX module with their
// parameters.
func PTXEntries(ptx []byte) ([]PTXEntry, error) {
	if len(ptx) > MaxPTX {
		return nil, ptxErr(0, "size", "%d bytes is more than %d", len(ptx), MaxPTX)
	}
	s := string(ptx)
	var out []PTXEntry
	for off := 0; ; {
		i := strings.Index(s[off:], ".entry")
		if i < 0 {
			return out, nil
		}
		at := off + i
		off = at + len(".entry")
		if at > 0 && !isSpace(s[at-1]) || off < len(s) && !isSpace(s[off]) {
			continue // part of another word
		}
		open := strings.IndexByte(s[off:], '(')
		body := strings.IndexByte(s[off:], '{')
		if open < 0 || body >= 0 && body < open {
			// An entry without a parameter list: `.entry k {`.
			name := strings.TrimSpace(s[off:])
			if body >= 0 {
				name = strings.TrimSpace(s[off : off+body])
			}
			if !validIdent(name) {
				return nil, ptxErr(at, ".entry", "no valid name (%.40q)", name)
			}
			out = append(out, PTXEntry{Name: name})
			continue
		}
		name := strings.TrimSpace(s[off : off+open])
		if !validIdent(name) {
			return nil, ptxErr(at, ".entry", "no valid name (%.40q)", name)
		}
		closeAt := strings.IndexByte(s[off+open:], ')')
		if closeAt < 0 {
			return nil, ptxErr(off+open, ".entry "+name, "parameter list not closed")
		}
		list := s[off+open+1 : off+open+closeAt]
		e := PTXEntry{Name: name}
		for j, decl := range strings.Split(list, ",") {
			decl = strings.TrimSpace(decl)
			if decl == "" && j == 0 && strings.TrimSpace(list) == "" {
				break
			}
			p, err := parsePTXParam(decl)
			if err != nil {
				return nil, ptxErr(off+open, ".entry "+name, "parameter %d: %v", j, err)
			}
			e.Params = append(e.Params, p)
		}
		out = append(out, e)
		off += open + closeAt
	}
}

func parsePTXParam(decl string) (PTXParam, error) {
	f := strings.Fields(decl)
	if len(f) < 3 || f[0] != ".param" {
		return PTXParam{}, fmt.Errorf("%.60q is not `.param .TYPE NAME`", decl)
	}
	p := PTXParam{Count: 1}
	for _, w := range f[1 : len(f)-1] {
		switch {
		case w == ".ptr":
			p.Ptr = true
		case w == ".align" || isNumber(w):
		case strings.HasPrefix(w, ".") && typeWidth(w[1:]) > 0:
			p.Type = w[1:]
		case strings.HasPrefix(w, ".") && (w == ".global" || w == ".const" || w == ".shared" || w == ".local"):
			// the state space a .ptr points into
		default:
			return PTXParam{}, fmt.Errorf("unknown qualifier %.20q", w)
		}
	}
	if p.Type == "" {
		return PTXParam{}, fmt.Errorf("%.60q has no type", decl)
	}
	name := f[len(f)-1]
	if i := strings.IndexByte(name, '['); i >= 0 {
		if !strings.HasSuffix(name, "]") {
			return PTXParam{}, fmt.Errorf("array %.40q not closed", name)
		}
		n, err := strconv.Atoi(name[i+1 : len(name)-1])
		if err != nil || n <= 0 || n > MaxPTX {
			return PTXParam{}, fmt.Errorf("array %.40q has no valid length", name)
		}
		p.Count, name = n, name[:i]
	}
	if !validIdent(name) {
		return PTXParam{}, fmt.Errorf("invalid name %.40q", name)
	}
	p.Name = name
	p.Size = typeWidth(p.Type) * p.Count
	return p, nil
}

// typeWidth is the size in bytes of a PTX fundamental type, 0 if t is none.
func typeWidth(t string) int {
	if len(t) < 2 {
		return 0
	}
	switch t[0] {
	case 'u', 's', 'b', 'f':
	default:
		return 0
	}
	switch t[1:] {
	case "8":
		return 1
	case "16":
		return 2
	case "32":
		return 4
	case "64":
		return 8
	}
	return 0
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isNumber(s string) bool {
	_, err := strconv.Atoi(s)
	return err == nil
}

// validIdent: PTX identifiers are letters, digits, _ $ % (not starting with a digit).
func validIdent(s string) bool {
	if s == "" || len(s) > 4096 || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c == '$' || c == '%' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
