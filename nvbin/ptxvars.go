package nvbin

import "strings"

// PTXVariables lists the module-scope variables a PTX module declares in
// global or constant memory (`.visible .global .align 4 .f32 x;`,
// `.const .align 4 .b8 t[16] = {...};`), by name, in order: a module
// assembled again from this PTX gets copies of its own, which the
// application's module does not share. Declarations inside functions and
// in other state spaces are not listed.
func PTXVariables(ptx []byte) []string {
	if len(ptx) > MaxPTX {
		return nil
	}
	var out []string
	depth := 0
	for _, line := range strings.Split(string(ptx), "\n") {
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		t := strings.TrimSpace(line)
		if depth == 0 {
			if name, ok := moduleVariable(t); ok {
				out = append(out, name)
			}
		}
		depth += strings.Count(t, "{") - strings.Count(t, "}")
		if depth < 0 {
			depth = 0
		}
	}
	return out
}

// moduleVariable reads a declaration in global or constant memory: linkage
// directives, the state space, then alignment, type and the name.
func moduleVariable(t string) (string, bool) {
	decl, _, _ := strings.Cut(t, "=")
	decl, _, _ = strings.Cut(decl, ";")
	f := strings.Fields(decl)
	i := 0
	for i < len(f) && (f[i] == ".visible" || f[i] == ".extern" || f[i] == ".weak" || f[i] == ".common") {
		i++
	}
	if i >= len(f) || (f[i] != ".global" && f[i] != ".const") || i == len(f)-1 {
		return "", false
	}
	name, _, _ := strings.Cut(f[len(f)-1], "[")
	if name == "" || strings.HasPrefix(name, ".") {
		return "", false
	}
	return name, true
}
