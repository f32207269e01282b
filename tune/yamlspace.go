package tune

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/expr-lang/expr/vm"
	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/internal/safefile"
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

// deriveFields are the configuration fields a space file may derive: the
// tunable fields of mneme's table, shapes per component.
var deriveFields = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range mneme.TunableKeys() {
		m[k] = true
	}
	return m
}()

var paramKeys = map[string]bool{"type": true, "low": true, "high": true, "step": true, "log": true, "values": true, "value": true}

type namedExpr struct {
	name, text string
	line       int
	prog       *vm.Program
}

// LoadSpaceFile reads a declarative space from a YAML file.
func LoadSpaceFile(path string, l Launch, lim mneme.DeviceLimits) (*Space, error) {
	data, err := safefile.ReadFile(path, safefile.MaxConfig)
	if err != nil {
		return nil, fmt.Errorf("space file: %w", err)
	}
	return ParseSpace(path, data, l, lim)
}

// spaceFile is a space file being read: its sections, then their compiled
// expressions.
type spaceFile struct {
	file        string
	vars        map[string]any
	space       *Space
	params      *yaml.Node
	lets        []namedExpr
	derives     []namedExpr
	constraints []namedExpr
	baseline    mneme.Config // what derivations start from, fixed by attach
}

// errAt is an error at node n (line 0 without one) about key.
func (f *spaceFile) errAt(n *yaml.Node, key, format string, a ...any) error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return fmt.Errorf("%s:%d: %s: %s", f.file, line, key, fmt.Sprintf(format, a...))
}

// ParseSpace reads a declarative space; file names the source in errors.
func ParseSpace(file string, data []byte, l Launch, lim mneme.DeviceLimits) (*Space, error) {
	lim = lim.WithDefaults()
	l.Grid, l.Block = normDim(l.Grid), normDim(l.Block)
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	if len(doc.Content) == 0 {
		return nil, fmt.Errorf("%s: empty space file", file)
	}
	f := &spaceFile{file: file, vars: l.Vars(lim)}
	f.space = &Space{Name: strings.TrimSuffix(baseName(file), ".yaml"), Baseline: mneme.Baseline(l.Grid, l.Block, l.SharedMem), Vars: f.vars, Limits: lim}
	if err := f.readSections(doc.Content[0]); err != nil {
		return nil, err
	}
	if err := f.readParams(); err != nil {
		return nil, err
	}
	if err := f.compile(); err != nil {
		return nil, err
	}
	f.attach()
	return f.space, f.space.Validate()
}

// readSections sorts the top-level keys into their sections.
func (f *spaceFile) readSections(root *yaml.Node) error {
	if root.Kind != yaml.MappingNode {
		return f.errAt(root, "(top level)", "want a mapping with params, derive and constraints")
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		var err error
		switch k.Value {
		case "name":
			f.space.Name = v.Value
		case "description":
		case "params":
			f.params = v
		case "let":
			f.lets, err = f.readExprMap(k.Value, v, nil)
		case "derive":
			f.derives, err = f.readExprMap(k.Value, v, deriveFields)
		case "constraints":
			f.constraints, err = f.readConstraints(v)
		default:
			err = f.errAt(k, k.Value, "unknown key (want name, description, params, let, derive, constraints)")
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// readExprMap reads a section of name: expression; known, when set, lists the
// names the section may define.
func (f *spaceFile) readExprMap(section string, v *yaml.Node, known map[string]bool) ([]namedExpr, error) {
	if v.Kind != yaml.MappingNode {
		return nil, f.errAt(v, section, "want a mapping of name: expression")
	}
	var out []namedExpr
	seen := map[string]bool{}
	for j := 0; j+1 < len(v.Content); j += 2 {
		nk, nv := v.Content[j], v.Content[j+1]
		// The parser keeps both; the later would win silently.
		if seen[nk.Value] {
			return nil, f.errAt(nk, section+"."+nk.Value, "defined twice")
		}
		seen[nk.Value] = true
		if nv.Kind != yaml.ScalarNode {
			return nil, f.errAt(nv, section+"."+nk.Value, "want an expression string")
		}
		if known != nil && !known[nk.Value] {
			return nil, f.errAt(nk, section+"."+nk.Value, "unknown configuration field (want one of %s)", strings.Join(sortedKeys(known), ", "))
		}
		out = append(out, namedExpr{name: nk.Value, text: nv.Value, line: nv.Line})
	}
	return out, nil
}

// readConstraints reads the list of boolean expressions.
func (f *spaceFile) readConstraints(v *yaml.Node) ([]namedExpr, error) {
	if v.Kind != yaml.SequenceNode {
		return nil, f.errAt(v, "constraints", "want a list of boolean expressions")
	}
	var out []namedExpr
	for j, c := range v.Content {
		name := fmt.Sprintf("constraints[%d]", j)
		if c.Kind != yaml.ScalarNode {
			return nil, f.errAt(c, name, "want an expression string")
		}
		out = append(out, namedExpr{name: name, text: c.Value, line: c.Line})
	}
	return out, nil
}

// readParams reads the parameter definitions, which must not reuse the name
// of a recorded value or of another parameter.
func (f *spaceFile) readParams() error {
	n := f.params
	if n == nil || n.Kind != yaml.MappingNode || len(n.Content) == 0 {
		return f.errAt(n, "params", "want a non-empty mapping of parameter name: definition")
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		p, err := parseParam(n.Content[i], n.Content[i+1], f.errAt)
		if err != nil {
			return err
		}
		if _, clash := f.vars[p.Name]; clash {
			return f.errAt(n.Content[i], "params."+p.Name, "the name is taken by a recorded value; choose another")
		}
		if p.Name == baselineParam {
			return f.errAt(n.Content[i], "params."+p.Name, "the name marks the baseline trial's params; choose another")
		}
		if _, dup := f.space.Param(p.Name); dup {
			return f.errAt(n.Content[i], "params."+p.Name, "defined twice")
		}
		f.space.Params = append(f.space.Params, p)
	}
	return nil
}

// compile compiles the expressions in order, typing each later name by its
// value at a sample point (the parameters' first values).
func (f *spaceFile) compile() error {
	env := exprEnv(f.space.Params, f.vars)
	if err := f.compileNamed(f.lets, "let", env, func(n string) string { return n }); err != nil {
		return err
	}
	if err := f.compileNamed(f.derives, "derive", env, envName); err != nil {
		return err
	}
	for i := range f.constraints {
		c := &f.constraints[i]
		prog, err := compileExpr(c.text, env, true)
		if err != nil {
			return fmt.Errorf("%s:%d: %s: %q: %v", f.file, c.line, c.name, c.text, firstLine(err.Error()))
		}
		c.prog = prog
	}
	return nil
}

// compileNamed compiles a let or derive section, adding each name to env
// (as asName gives it) with its value at the sample point, or 1.0 when that
// cannot be computed.
func (f *spaceFile) compileNamed(list []namedExpr, section string, env map[string]any, asName func(string) string) error {
	for i := range list {
		e := &list[i]
		prog, err := compileExpr(e.text, env, false)
		if err != nil {
			return fmt.Errorf("%s:%d: %s.%s: %q: %v", f.file, e.line, section, e.name, e.text, firstLine(err.Error()))
		}
		e.prog = prog
		val, err := runExprEnv(prog, env)
		if err != nil {
			val = 1.0
		}
		env[asName(e.name)] = val
	}
	return nil
}

// envName is the name under which expressions see a derived field (block.x
// as block_x).
func envName(field string) string { return strings.ReplaceAll(field, ".", "_") }

// derive evaluates the let values and fields of a point; it returns the
// configuration and the full environment for the constraints.
func (f *spaceFile) derive(pt Point) (mneme.Config, map[string]any, error) {
	env := make(map[string]any, len(f.vars)+len(pt)+len(f.lets)+len(f.derives))
	for k, v := range f.vars {
		env[k] = v
	}
	for k, v := range pt {
		env[k] = v
	}
	for _, e := range f.lets {
		v, err := runExprEnv(e.prog, env)
		if err != nil {
			return mneme.Config{}, nil, fmt.Errorf("%s:%d: let.%s: %v", f.file, e.line, e.name, err)
		}
		env[e.name] = v
	}
	c := f.baseline
	lbSet, mtSet := false, false
	for _, e := range f.derives {
		v, err := runExprEnv(e.prog, env)
		if err != nil {
			return mneme.Config{}, nil, fmt.Errorf("%s:%d: derive.%s: %v", f.file, e.line, e.name, err)
		}
		if err := c.Set(e.name, v); err != nil {
			// The error names the field, so it reads derive.<field>: ...
			return mneme.Config{}, nil, fmt.Errorf("%s:%d: derive.%v", f.file, e.line, err)
		}
		env[envName(e.name)] = v
		lbSet = lbSet || e.name == mneme.KeySetLaunchBounds
		mtSet = mtSet || e.name == mneme.KeyMaxThreads
	}
	// Launch bounds without a thread count bound the block as derived.
	if lbSet && c.SetLaunchBounds && !mtSet {
		c.MaxThreads = int(c.Block.Count())
	}
	return c, env, nil
}

// attach gives the space its derivation and constraints. Evaluate checks
// every constraint of a point and then derives it: the last point's
// derivation is kept so that happens once, not once per constraint and again
// for the configuration.
func (f *spaceFile) attach() {
	f.baseline = f.space.Baseline
	var (
		lastMu  sync.Mutex
		lastKey string
		lastCfg mneme.Config
		lastEnv map[string]any
		lastErr error
	)
	derived := func(pt Point) (mneme.Config, map[string]any, error) {
		key := pt.Key()
		lastMu.Lock()
		defer lastMu.Unlock()
		if lastEnv == nil && lastErr == nil || key != lastKey {
			lastCfg, lastEnv, lastErr = f.derive(pt)
			lastKey = key
		}
		return lastCfg, lastEnv, lastErr
	}
	f.space.Derive = func(pt Point) (mneme.Config, error) {
		c, _, err := derived(pt)
		c.SpecializeArgs = slices.Clone(c.SpecializeArgs) // the kept one stays intact
		return c, err
	}
	for _, c := range f.constraints {
		f.space.Constraints = append(f.space.Constraints, Constraint{Name: c.text, Check: func(pt Point) (bool, error) {
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
}

// paramDef is one parameter's definition as read: its fields by key.
type paramDef struct {
	name, key string // the parameter's name, and "params.<name>" for errors
	node      *yaml.Node
	fields    map[string]*yaml.Node
	errAt     func(*yaml.Node, string, string, ...any) error
}

func parseParam(k, v *yaml.Node, errAt func(*yaml.Node, string, string, ...any) error) (Param, error) {
	name := k.Value
	d := paramDef{name: name, key: "params." + name, node: v, fields: map[string]*yaml.Node{}, errAt: errAt}
	if !validIdent(name) {
		return Param{}, errAt(k, d.key, "parameter names must be identifiers (letters, digits, _)")
	}
	if v.Kind != yaml.MappingNode {
		return Param{}, errAt(v, d.key, "want a mapping with a type")
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		fk := v.Content[i]
		if !paramKeys[fk.Value] {
			return Param{}, errAt(fk, d.key+"."+fk.Value, "unknown key (want type, low, high, step, log, values, value)")
		}
		d.fields[fk.Value] = v.Content[i+1]
	}
	tn, ok := d.fields["type"]
	if !ok {
		return Param{}, errAt(v, d.key, "missing type (fixed, bool, categorical, int, real or pipeline)")
	}
	var p Param
	var err error
	switch tn.Value {
	case KindFixed:
		p, err = d.fixed()
	case KindBool:
		p = Bool(name)
	case KindCategorical, KindPipeline:
		p, err = d.choices(tn.Value)
	case KindInt, KindReal:
		p, err = d.numRange(tn.Value)
	default:
		return Param{}, errAt(tn, d.key+".type", "unknown parameter type %q (want fixed, bool, categorical, int, real or pipeline)", tn.Value)
	}
	if err != nil {
		return Param{}, err
	}
	if err := p.Validate(); err != nil {
		return Param{}, errAt(v, d.key, "%v", err)
	}
	return p, nil
}

// num reads the numeric field f.
func (d paramDef) num(f string) (float64, error) {
	n, ok := d.fields[f]
	if !ok {
		return 0, d.errAt(d.node, d.key, "missing %s", f)
	}
	var x float64
	if err := n.Decode(&x); err != nil {
		return 0, d.errAt(n, d.key+"."+f, "want a number, got %q", n.Value)
	}
	return x, nil
}

// fixed reads a parameter with one value.
func (d paramDef) fixed() (Param, error) {
	n, ok := d.fields["value"]
	if !ok {
		return Param{}, d.errAt(d.node, d.key, "fixed needs a value")
	}
	x, err := scalarValue(n)
	if err != nil {
		return Param{}, d.errAt(n, d.key+".value", "%v", err)
	}
	return Fixed(d.name, x), nil
}

// choices reads a categorical or pipeline parameter's list of values.
func (d paramDef) choices(kind string) (Param, error) {
	n, ok := d.fields["values"]
	if !ok || n.Kind != yaml.SequenceNode {
		return Param{}, d.errAt(d.node, d.key, "%s needs a list of values", kind)
	}
	var choices []any
	for _, c := range n.Content {
		x, err := scalarValue(c)
		if err != nil {
			return Param{}, d.errAt(c, d.key+".values", "%v", err)
		}
		choices = append(choices, x)
	}
	return Param{Name: d.name, Kind: kind, Choices: choices}, nil
}

// numRange reads an int or real range: low, high, an int's step (a real has
// none) and log.
func (d paramDef) numRange(kind string) (Param, error) {
	lo, err := d.num("low")
	if err != nil {
		return Param{}, err
	}
	hi, err := d.num("high")
	if err != nil {
		return Param{}, err
	}
	p := Param{Name: d.name, Kind: kind, Low: lo, High: hi}
	if kind == KindInt {
		p.Step = 1
		if _, ok := d.fields["step"]; ok {
			if p.Step, err = d.num("step"); err != nil {
				return Param{}, err
			}
		}
	} else if _, ok := d.fields["step"]; ok {
		return Param{}, d.errAt(d.fields["step"], d.key+".step", "a real range has no step; use an int range and scale it in derive")
	}
	if n, ok := d.fields["log"]; ok {
		if err := n.Decode(&p.Log); err != nil {
			return Param{}, d.errAt(n, d.key+".log", "want true or false")
		}
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

func sortedKeys(m map[string]bool) []string {
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
