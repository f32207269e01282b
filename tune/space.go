package tune

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"
	"github.com/mneme-gpu/mneme"
	"github.com/zeebo/xxh3"
)

// Constraint rejects points that must not become trials. Check returns false
// for an infeasible point; an error means the constraint could not be
// evaluated (a bad expression), which is also infeasible but worth reporting.
type Constraint struct {
	Name  string
	Check func(Point) (bool, error)
}

// ErrInfeasible marks a point that a constraint or the derivation rejected.
var ErrInfeasible = errors.New("infeasible point")

// Space is a named set of parameters, the constraints between them and the
// derivation of a replay configuration from a point.
type Space struct {
	Name        string
	Params      []Param
	Constraints []Constraint
	// Derive turns a feasible point into the configuration a worker replays.
	Derive func(Point) (mneme.Config, error)
	// Baseline reproduces the recorded launch; speedups are relative to it.
	Baseline mneme.Config
	// Vars are the recorded values (N, grid and block of the recording,
	// device limits) that expressions may use; kept for display.
	Vars map[string]any
	// Limits bound derived configurations (block size, shared memory).
	Limits mneme.DeviceLimits
	// proposed is set for a space defined in Python (--space-module): its
	// points and configurations come from the proposer.
	proposed *proposedSpace
}

// Validate checks parameter definitions and names.
func (s *Space) Validate() error {
	if len(s.Params) == 0 {
		return fmt.Errorf("space %q has no parameters", s.Name)
	}
	seen := map[string]bool{}
	for _, p := range s.Params {
		if err := p.Validate(); err != nil {
			return fmt.Errorf("space %q: %w", s.Name, err)
		}
		if seen[p.Name] {
			return fmt.Errorf("space %q: parameter %q is defined twice", s.Name, p.Name)
		}
		seen[p.Name] = true
	}
	if s.Derive == nil {
		return fmt.Errorf("space %q has no derivation", s.Name)
	}
	return nil
}

// Param returns the parameter called name.
func (s *Space) Param(name string) (Param, bool) {
	for _, p := range s.Params {
		if p.Name == name {
			return p, true
		}
	}
	return Param{}, false
}

// Size is the number of points before constraints, and whether the space is
// finite. It saturates at math.MaxInt64.
func (s *Space) Size() (int64, bool) {
	n := int64(1)
	for _, p := range s.Params {
		if !p.Finite() {
			return 0, false
		}
		c := int64(p.Cardinality())
		if c != 0 && n > math.MaxInt64/c {
			return math.MaxInt64, true
		}
		n *= c
	}
	return n, true
}

// Evaluate checks a point against the constraints, derives its configuration
// and checks that against CUDA's and the device's limits. An infeasible point
// gives an error wrapping ErrInfeasible that says why.
func (s *Space) Evaluate(pt Point) (mneme.Config, error) {
	for _, c := range s.Constraints {
		ok, err := c.Check(pt)
		if err != nil {
			return mneme.Config{}, fmt.Errorf("%w: constraint %s: %v", ErrInfeasible, c.Name, err)
		}
		if !ok {
			return mneme.Config{}, fmt.Errorf("%w: constraint %s", ErrInfeasible, c.Name)
		}
	}
	cfg, err := s.Derive(pt)
	if err != nil {
		return mneme.Config{}, fmt.Errorf("%w: %v", ErrInfeasible, err)
	}
	if err := cfg.Validate(); err != nil {
		return mneme.Config{}, fmt.Errorf("%w: %v", ErrInfeasible, err)
	}
	if err := s.Limits.Check(cfg); err != nil {
		return mneme.Config{}, fmt.Errorf("%w: %v", ErrInfeasible, err)
	}
	return cfg, nil
}

// Normalize converts values read back from JSON (numbers as float64) to the
// parameter's own types, and rejects names and values the space lacks.
func (s *Space) Normalize(pt Point) (Point, error) {
	if s.proposed != nil {
		return pt, nil // the Python class's values, as it proposed them
	}
	out := Point{}
	for _, p := range s.Params {
		v, ok := pt[p.Name]
		if !ok {
			return nil, fmt.Errorf("point lacks parameter %q", p.Name)
		}
		if p.Kind == KindReal {
			f, ok := toFloat(v)
			if !ok || f < p.Low || f > p.High {
				return nil, fmt.Errorf("parameter %q: value %v outside %v..%v", p.Name, v, p.Low, p.High)
			}
			out[p.Name] = f
			continue
		}
		i, ok := p.IndexOf(v)
		if !ok || i >= p.Cardinality() {
			return nil, fmt.Errorf("parameter %q: value %v is not one of its values", p.Name, v)
		}
		out[p.Name] = p.ValueAt(i)
	}
	if len(pt) != len(out) {
		for n := range pt {
			if _, ok := s.Param(n); !ok {
				return nil, fmt.Errorf("point has unknown parameter %q", n)
			}
		}
	}
	return out, nil
}

// Describe is the JSON form of the space written to search_space.json and
// printed by --print-space.
type Describe struct {
	Name        string         `json:"name"`
	Params      []Param        `json:"params"`
	Constraints []string       `json:"constraints,omitempty"`
	Size        int64          `json:"size,omitempty"`
	Finite      bool           `json:"finite"`
	Feasible    int64          `json:"feasible,omitempty"`
	Baseline    mneme.Config   `json:"baseline"`
	Vars        map[string]any `json:"vars,omitempty"`
}

// maxCountFeasible bounds the enumeration Describe does to count feasible points.
const maxCountFeasible = 2_000_000

// Describe summarizes the space; for finite spaces up to a couple of million
// points it also counts the feasible ones, which costs an enumeration.
func (s *Space) Describe() Describe {
	d := Describe{Name: s.Name, Params: s.Params, Constraints: s.constraintNames(), Baseline: s.Baseline, Vars: s.Vars}
	if s.proposed != nil {
		d.Size, d.Finite, d.Feasible = s.proposed.size, s.proposed.finite, s.proposed.feasible
		return d
	}
	d.Size, d.Finite = s.Size()
	if d.Finite && d.Size <= maxCountFeasible {
		ex, err := NewExhaustive(s)
		for err == nil {
			if _, ok := ex.Ask(); !ok {
				break
			}
			d.Feasible++
		}
	}
	return d
}

func (s *Space) constraintNames() []string {
	var names []string
	for _, c := range s.Constraints {
		names = append(names, c.Name)
	}
	return names
}

// Hash identifies the space by its parameters, constraints and baseline (not
// its name or recorded values), so --resume can tell whether a run's space
// changed. It enumerates nothing.
func (s *Space) Hash() string {
	b, err := json.Marshal(struct {
		P any
		C any
		B any
	}{s.Params, s.constraintNames(), s.Baseline})
	if err != nil { // a NaN choice; such a space fails writing search_space.json
		b = []byte(err.Error())
	}
	return fmt.Sprintf("%016x", xxh3.Hash(b))
}

// ConfigKey is a canonical hash of a configuration: two points that derive
// the same configuration are the same trial.
func ConfigKey(c mneme.Config) string {
	b, err := json.Marshal(c)
	if err != nil { // plain data; cannot fail
		panic(err)
	}
	return fmt.Sprintf("%016x", xxh3.Hash(b))
}

// ExprConstraint compiles a boolean expr-lang expression over the parameters
// and the given variables; a name that is neither is an error.
func ExprConstraint(text string, params []Param, vars map[string]any) (Constraint, error) {
	prog, err := compileExpr(text, exprEnv(params, vars), true)
	if err != nil {
		return Constraint{}, err
	}
	return Constraint{Name: text, Check: func(pt Point) (bool, error) {
		out, err := runExpr(prog, pt, vars)
		if err != nil {
			return false, err
		}
		b, ok := out.(bool)
		if !ok {
			return false, fmt.Errorf("%q gave %v, not a boolean", text, out)
		}
		return b, nil
	}}, nil
}

// exprFunctions are available to every expression besides expr-lang's
// built-ins (which include ceil, floor, round, abs, min, max).
var exprFunctions = []expr.Option{
	expr.Function("pow", func(p ...any) (any, error) {
		a, ok1 := toFloat(p[0])
		b, ok2 := toFloat(p[1])
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("pow wants numbers")
		}
		return math.Pow(a, b), nil
	}, new(func(float64, float64) float64)),
	expr.Function("log2", func(p ...any) (any, error) {
		a, ok := toFloat(p[0])
		if !ok {
			return nil, fmt.Errorf("log2 wants a number")
		}
		return math.Log2(a), nil
	}, new(func(float64) float64)),
	expr.Function("cdiv", func(p ...any) (any, error) {
		a, ok1 := toFloat(p[0])
		b, ok2 := toFloat(p[1])
		if !ok1 || !ok2 || b == 0 {
			return nil, fmt.Errorf("cdiv wants numbers and a non-zero divisor")
		}
		return math.Ceil(a / b), nil
	}, new(func(float64, float64) float64)),
}

// exprEnv is the compile-time environment: the variables plus one value of
// each parameter, which gives expr its types.
func exprEnv(params []Param, vars map[string]any) map[string]any {
	env := make(map[string]any, len(params)+len(vars))
	for k, v := range vars {
		env[k] = v
	}
	for _, p := range params {
		env[p.Name] = p.ValueAt(0)
		if p.Kind == KindReal {
			env[p.Name] = p.Low
		}
	}
	return env
}

// compileExpr compiles text against env; undefined names are errors.
func compileExpr(text string, env map[string]any, wantBool bool) (*vm.Program, error) {
	if err := checkExprSize(text); err != nil {
		return nil, err
	}
	opts := append([]expr.Option{expr.Env(env)}, exprFunctions...)
	if wantBool {
		opts = append(opts, expr.AsBool())
	}
	return expr.Compile(text, opts...)
}

// Bounds on an expression's text: the parser recurses once per bracket and
// per unary operator, and a deep enough nesting overflows the stack (a
// fatal error, not a panic). Expressions of a space are a line or two.
const (
	maxExprBytes = 4096
	maxExprDepth = 64
)

// checkExprSize refuses an expression too long or nested too deep to parse
// safely, before the parser sees it.
func checkExprSize(text string) error {
	if len(text) > maxExprBytes {
		return fmt.Errorf("expression of %d bytes: the limit is %d", len(text), maxExprBytes)
	}
	depth := 0
	var quote byte
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'' || c == '`':
			quote = c
		case c == '(' || c == '[' || c == '{':
			if depth++; depth > maxExprDepth {
				return fmt.Errorf("expression nests brackets more than %d deep", maxExprDepth)
			}
		case c == ')' || c == ']' || c == '}':
			depth--
		}
	}
	return nil
}

func runExpr(prog *vm.Program, pt Point, vars map[string]any) (any, error) {
	env := make(map[string]any, len(pt)+len(vars))
	for k, v := range vars {
		env[k] = v
	}
	for k, v := range pt {
		env[k] = v
	}
	return expr.Run(prog, env)
}
