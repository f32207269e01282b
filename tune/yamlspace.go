package tune

import (
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/expr-lang/expr/vm"
	"github.com/mneme-gpu/mneme/spec"
	"gopkg.in/yaml.v3"
)

// A declarative space file (SPACES.md):
//
//	name: fractional
//	params:
//	  frac:  {type: real, low: 0.05, high: 1.0}
//	  opt:   {type: pipeline, values: ["default<O2>", "default<O3>"]}
//	let:                       # optional helper values, in order
//	  threads: "32 * ceil(frac * 32)"
//	derive:                    # configuration fields, in order
//	  block.x: "threads"
//	  grid.x: "ceil(N / block_x)"
//	  passes: "opt"
//	constraints:
//	  - "block_x <= max_threads"
//
// Every expression sees the recorded values (Launch.Vars), the parameters,
// the let values and the fields derived before it (block.x as block_x).

// deriveFields are the configuration fields a space file may derive, with
// the kind of value each wants.
var deriveFields = map[string]string{
	"grid.x": "uint", "grid.y": "uint", "grid.z": "uint",
	"block.x": "uint", "block.y": "uint", "block.z": "uint",
	"shared_mem": "uint", "specialize": "bool", "specialize_args": "ints",
	"specialize_dims": "bool", "set_launch_bounds": "bool", "max_threads": "int",
	"min_blocks_per_sm": "int", "passes": "string", "codegen_opt": "int",
	"prune": "bool", "internalize": "bool", "ptxas_opt": "int", "max_registers": "int",
}

var paramKeys = map[string]bool{"type": true, "low": true, "high": true, "step": true, "log": true, "values": true, "value": true}

type namedExpr struct {
	name, text string
	line       int
	prog       *vm.Program
}

// LoadSpaceFile reads a declarative space from a YAML file.
func LoadSpaceFile(path string, l Launch, lim Limits) (*Space, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("space file: %w", err)
	}
	return ParseSpace(path, data, l, lim)
}

// ParseSpace reads a declarative space; file names the source in errors.
func ParseSpace(file string, data []byte, l Launch, lim Limits) (*Space, error) {
	lim = lim.WithDefaults()
	l.Grid, l.Block = normDim(l.Grid), normDim(l.Block)
	errAt := func(n *yaml.Node, key, format string, a ...any) error {
		line := 0
		if n != nil {
			line = n.Line
		}
		return fmt.Errorf("%s:%d: %s: %s", file, line, key, fmt.Sprintf(format, a...))
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	if len(doc.Content) == 0 {
		return nil, fmt.Errorf("%s: empty space file", file)
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, errAt(root, "(top level)", "want a mapping with params, derive and constraints")
	}
	vars := l.Vars(lim)
	s := &Space{Name: strings.TrimSuffix(baseName(file), ".yaml"), Baseline: spec.Baseline(l.Grid, l.Block, l.SharedMem), Vars: vars, Limits: lim}
	var lets, derives []namedExpr
	var constraints []namedExpr
	var paramsNode *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		switch k.Value {
		case "name":
			s.Name = v.Value
		case "description":
		case "params":
			paramsNode = v
		case "let", "derive":
			if v.Kind != yaml.MappingNode {
				return nil, errAt(v, k.Value, "want a mapping of name: expression")
			}
			for j := 0; j+1 < len(v.Content); j += 2 {
				nk, nv := v.Content[j], v.Content[j+1]
				if nv.Kind != yaml.ScalarNode {
					return nil, errAt(nv, k.Value+"."+nk.Value, "want an expression string")
				}
				e := namedExpr{name: nk.Value, text: nv.Value, line: nv.Line}
				if k.Value == "derive" {
					if _, ok := deriveFields[nk.Value]; !ok {
						return nil, errAt(nk, "derive."+nk.Value, "unknown configuration field (want one of %s)", strings.Join(sortedKeys(deriveFields), ", "))
					}
					derives = append(derives, e)
				} else {
					lets = append(lets, e)
				}
			}
		case "constraints":
			if v.Kind != yaml.SequenceNode {
				return nil, errAt(v, "constraints", "want a list of boolean expressions")
			}
			for j, c := range v.Content {
				if c.Kind != yaml.ScalarNode {
					return nil, errAt(c, fmt.Sprintf("constraints[%d]", j), "want an expression string")
				}
				constraints = append(constraints, namedExpr{name: fmt.Sprintf("constraints[%d]", j), text: c.Value, line: c.Line})
			}
		default:
			return nil, errAt(k, k.Value, "unknown key (want name, description, params, let, derive, constraints)")
		}
	}
	if paramsNode == nil || paramsNode.Kind != yaml.MappingNode || len(paramsNode.Content) == 0 {
		return nil, errAt(paramsNode, "params", "want a non-empty mapping of parameter name: definition")
	}
	for i := 0; i+1 < len(paramsNode.Content); i += 2 {
		p, err := parseParam(paramsNode.Content[i], paramsNode.Content[i+1], errAt)
		if err != nil {
			return nil, err
		}
		if _, clash := vars[p.Name]; clash {
			return nil, errAt(paramsNode.Content[i], "params."+p.Name, "the name is taken by a recorded value; choose another")
		}
		if _, dup := s.Param(p.Name); dup {
			return nil, errAt(paramsNode.Content[i], "params."+p.Name, "defined twice")
		}
		s.Params = append(s.Params, p)
	}
	// Compile in order, typing each later name by its value at a sample point.
	env := exprEnv(s.Params, vars)
	sample := Point{}
	for _, p := range s.Params {
		sample[p.Name] = env[p.Name]
	}
	compile := func(list []namedExpr, section string, asName func(string) string, wantBool bool) error {
		for i := range list {
			e := &list[i]
			prog, err := compileExpr(e.text, env, wantBool)
			if err != nil {
				return fmt.Errorf("%s:%d: %s.%s: %q: %v", file, e.line, section, e.name, e.text, firstLine(err.Error()))
			}
			e.prog = prog
			if asName != nil {
				n := asName(e.name)
				val, err := runExprEnv(prog, env)
				if err != nil {
					val = 1.0
				}
				env[n] = val
			}
		}
		return nil
	}
	if err := compile(lets, "let", func(n string) string { return n }, false); err != nil {
		return nil, err
	}
	if err := compile(derives, "derive", func(n string) string { return strings.ReplaceAll(n, ".", "_") }, false); err != nil {
		return nil, err
	}
	for i := range constraints {
		c := &constraints[i]
		prog, err := compileExpr(c.text, env, true)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %s: %q: %v", file, c.line, c.name, c.text, firstLine(err.Error()))
		}
		c.prog = prog
	}
	base := s.Baseline
	// derive evaluates the let values and fields of a point; it returns the
	// configuration and the full environment for the constraints.
	derive := func(pt Point) (spec.Config, map[string]any, error) {
		env := make(map[string]any, len(vars)+len(pt)+len(lets)+len(derives))
		for k, v := range vars {
			env[k] = v
		}
		for k, v := range pt {
			env[k] = v
		}
		for _, e := range lets {
			v, err := runExprEnv(e.prog, env)
			if err != nil {
				return spec.Config{}, nil, fmt.Errorf("%s:%d: let.%s: %v", file, e.line, e.name, err)
			}
			env[e.name] = v
		}
		c := base
		lbSet, mtSet := false, false
		for _, e := range derives {
			v, err := runExprEnv(e.prog, env)
			if err != nil {
				return spec.Config{}, nil, fmt.Errorf("%s:%d: derive.%s: %v", file, e.line, e.name, err)
			}
			if err := setField(&c, e.name, v); err != nil {
				return spec.Config{}, nil, fmt.Errorf("%s:%d: derive.%s: %v", file, e.line, e.name, err)
			}
			env[strings.ReplaceAll(e.name, ".", "_")] = v
			lbSet = lbSet || e.name == "set_launch_bounds"
			mtSet = mtSet || e.name == "max_threads"
		}
		if lbSet && c.SetLaunchBounds && !mtSet {
			c.MaxThreads = int(c.Block.Count())
		}
		return c, env, nil
	}
	// Evaluate checks every constraint of a point and then derives it: the
	// last point's derivation is kept so that happens once, not once per
	// constraint and again for the configuration.
	var (
		lastMu  sync.Mutex
		lastKey string
		lastCfg spec.Config
		lastEnv map[string]any
		lastErr error
	)
	derived := func(pt Point) (spec.Config, map[string]any, error) {
		key := pt.Key()
		lastMu.Lock()
		defer lastMu.Unlock()
		if lastEnv == nil && lastErr == nil || key != lastKey {
			lastCfg, lastEnv, lastErr = derive(pt)
			lastKey = key
		}
		return lastCfg, lastEnv, lastErr
	}
	s.Derive = func(pt Point) (spec.Config, error) {
		c, _, err := derived(pt)
		c.SpecializeArgs = slices.Clone(c.SpecializeArgs) // the kept one stays intact
		return c, err
	}
	for _, c := range constraints {
		c := c
		s.Constraints = append(s.Constraints, Constraint{Name: c.text, Check: func(pt Point) (bool, error) {
			_, env, err := derived(pt)
			if err != nil {
				return false, err
			}
			out, err := runExprEnv(c.prog, env)
			if err != nil {
				return false, err
			}
			b, _ := out.(bool)
			return b, nil
		}})
	}
	return s, s.Validate()
}

func parseParam(k, v *yaml.Node, errAt func(*yaml.Node, string, string, ...any) error) (Param, error) {
	name := k.Value
	key := "params." + name
	if !validIdent(name) {
		return Param{}, errAt(k, key, "parameter names must be identifiers (letters, digits, _)")
	}
	if v.Kind != yaml.MappingNode {
		return Param{}, errAt(v, key, "want a mapping with a type")
	}
	fields := map[string]*yaml.Node{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		fk := v.Content[i]
		if !paramKeys[fk.Value] {
			return Param{}, errAt(fk, key+"."+fk.Value, "unknown key (want type, low, high, step, log, values, value)")
		}
		fields[fk.Value] = v.Content[i+1]
	}
	tn, ok := fields["type"]
	if !ok {
		return Param{}, errAt(v, key, "missing type (fixed, bool, categorical, int, real or pipeline)")
	}
	num := func(f string) (float64, error) {
		n, ok := fields[f]
		if !ok {
			return 0, errAt(v, key, "missing %s", f)
		}
		var x float64
		if err := n.Decode(&x); err != nil {
			return 0, errAt(n, key+"."+f, "want a number, got %q", n.Value)
		}
		return x, nil
	}
	var p Param
	switch tn.Value {
	case KindFixed:
		n, ok := fields["value"]
		if !ok {
			return Param{}, errAt(v, key, "fixed needs a value")
		}
		x, err := scalarValue(n)
		if err != nil {
			return Param{}, errAt(n, key+".value", "%v", err)
		}
		p = Fixed(name, x)
	case KindBool:
		p = Bool(name)
	case KindCategorical, KindPipeline:
		n, ok := fields["values"]
		if !ok || n.Kind != yaml.SequenceNode {
			return Param{}, errAt(v, key, "%s needs a list of values", tn.Value)
		}
		var choices []any
		for _, c := range n.Content {
			x, err := scalarValue(c)
			if err != nil {
				return Param{}, errAt(c, key+".values", "%v", err)
			}
			choices = append(choices, x)
		}
		p = Param{Name: name, Kind: tn.Value, Choices: choices}
	case KindInt, KindReal:
		lo, err := num("low")
		if err != nil {
			return Param{}, err
		}
		hi, err := num("high")
		if err != nil {
			return Param{}, err
		}
		p = Param{Name: name, Kind: tn.Value, Low: lo, High: hi}
		if tn.Value == KindInt {
			p.Step = 1
			if _, ok := fields["step"]; ok {
				if p.Step, err = num("step"); err != nil {
					return Param{}, err
				}
			}
		} else if _, ok := fields["step"]; ok {
			return Param{}, errAt(fields["step"], key+".step", "a real range has no step; use an int range and scale it in derive")
		}
		if n, ok := fields["log"]; ok {
			if err := n.Decode(&p.Log); err != nil {
				return Param{}, errAt(n, key+".log", "want true or false")
			}
		}
	default:
		return Param{}, errAt(tn, key+".type", "unknown parameter type %q (want fixed, bool, categorical, int, real or pipeline)", tn.Value)
	}
	if err := p.Validate(); err != nil {
		return Param{}, errAt(v, key, "%v", err)
	}
	return p, nil
}

// scalarValue decodes a YAML scalar as int, float, bool or string.
func scalarValue(n *yaml.Node) (any, error) {
	if n.Kind != yaml.ScalarNode {
		return nil, fmt.Errorf("want a scalar value")
	}
	switch n.Tag {
	case "!!int":
		var x int
		if err := n.Decode(&x); err == nil {
			return x, nil
		}
	case "!!float":
		var x float64
		if err := n.Decode(&x); err == nil {
			return x, nil
		}
	case "!!bool":
		var x bool
		if err := n.Decode(&x); err == nil {
			return x, nil
		}
	}
	return n.Value, nil
}

// setField stores an expression's value in the configuration field name.
func setField(c *spec.Config, name string, v any) error {
	switch deriveFields[name] {
	case "uint", "int":
		f, ok := toFloat(v)
		if !ok {
			return fmt.Errorf("gave %v (%T), want a number", v, v)
		}
		if f != math.Trunc(f) || math.IsInf(f, 0) {
			return fmt.Errorf("gave %v, want an integer", f)
		}
		if f < 0 || f > math.MaxUint32 {
			return fmt.Errorf("gave %v, out of range", f)
		}
		if deriveFields[name] == "uint" && f == 0 && name != "shared_mem" {
			return fmt.Errorf("gave 0, want at least 1")
		}
		n := int(f)
		switch name {
		case "grid.x":
			c.Grid.X = uint32(n)
		case "grid.y":
			c.Grid.Y = uint32(n)
		case "grid.z":
			c.Grid.Z = uint32(n)
		case "block.x":
			c.Block.X = uint32(n)
		case "block.y":
			c.Block.Y = uint32(n)
		case "block.z":
			c.Block.Z = uint32(n)
		case "shared_mem":
			c.SharedMem = uint32(n)
		case "max_threads":
			c.MaxThreads = n
		case "min_blocks_per_sm":
			c.MinBlocksPerSM = n
		case "codegen_opt":
			c.CodegenOpt = n
		case "ptxas_opt":
			c.PtxasOpt = n
		case "max_registers":
			c.MaxRegisters = n
		}
	case "bool":
		b, ok := v.(bool)
		if !ok {
			return fmt.Errorf("gave %v (%T), want true or false", v, v)
		}
		switch name {
		case "specialize":
			c.Specialize = b
		case "specialize_dims":
			c.SpecializeDims = b
		case "set_launch_bounds":
			c.SetLaunchBounds = b
		case "prune":
			c.Prune = b
		case "internalize":
			c.Internalize = b
		}
	case "string":
		str, ok := v.(string)
		if !ok || strings.TrimSpace(str) == "" {
			return fmt.Errorf("gave %v (%T), want a pipeline text", v, v)
		}
		c.Passes = str
	case "ints":
		list, ok := v.([]any)
		if !ok {
			return fmt.Errorf("gave %v (%T), want a list of argument indices", v, v)
		}
		c.SpecializeArgs = nil
		for _, x := range list {
			f, ok := toFloat(x)
			if !ok || f < 0 || f != math.Trunc(f) {
				return fmt.Errorf("argument index %v is not a non-negative integer", x)
			}
			c.SpecializeArgs = append(c.SpecializeArgs, int(f))
		}
	}
	return nil
}

func runExprEnv(prog *vm.Program, env map[string]any) (any, error) {
	return runExpr(prog, nil, env)
}

func validIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func baseName(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
