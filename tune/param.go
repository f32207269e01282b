package tune

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Parameter kinds.
const (
	KindFixed       = "fixed"
	KindBool        = "bool"
	KindCategorical = "categorical"
	KindInt         = "int"
	KindReal        = "real"
	KindPipeline    = "pipeline"
)

// Param is one named dimension of a search space. Finite kinds (fixed, bool,
// categorical, pipeline, int) enumerate their values; a real range is
// continuous.
type Param struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Choices holds the values of fixed (one), bool, categorical and pipeline parameters.
	Choices []any `json:"choices,omitempty"`
	// Low, High (inclusive) and Step bound int and real ranges. Step is the
	// int stride (≥ 1); reals are continuous.
	Low  float64 `json:"low,omitempty"`
	High float64 `json:"high,omitempty"`
	Step float64 `json:"step,omitempty"`
	// Log samples the range on a logarithmic scale (reals, and ints with step 1).
	Log bool `json:"log,omitempty"`
}

// Fixed is a parameter with one value; it appears in every point.
func Fixed(name string, value any) Param {
	return Param{Name: name, Kind: KindFixed, Choices: []any{value}}
}

// Bool is a false/true parameter.
func Bool(name string) Param {
	return Param{Name: name, Kind: KindBool, Choices: []any{false, true}}
}

// Categorical is a parameter over unordered choices (strings or numbers).
func Categorical(name string, choices ...any) Param {
	return Param{Name: name, Kind: KindCategorical, Choices: choices}
}

// Pipeline is a categorical parameter over optimization pipeline texts.
func Pipeline(name string, pipelines ...string) Param {
	c := make([]any, len(pipelines))
	for i, p := range pipelines {
		c[i] = p
	}
	return Param{Name: name, Kind: KindPipeline, Choices: c}
}

// IntRange is the integers low, low+step, ... up to high.
func IntRange(name string, low, high, step int) Param {
	return Param{Name: name, Kind: KindInt, Low: float64(low), High: float64(high), Step: float64(step)}
}

// RealRange is the continuous interval [low, high], optionally log-scaled.
func RealRange(name string, low, high float64, log bool) Param {
	return Param{Name: name, Kind: KindReal, Low: low, High: high, Log: log}
}

// Validate reports a malformed parameter.
func (p Param) Validate() error {
	if p.Name == "" {
		return fmt.Errorf("parameter of kind %q has no name", p.Kind)
	}
	switch p.Kind {
	case KindFixed:
		if len(p.Choices) != 1 {
			return fmt.Errorf("parameter %q: fixed needs exactly one value, has %d", p.Name, len(p.Choices))
		}
	case KindBool, KindCategorical, KindPipeline:
		if len(p.Choices) == 0 {
			return fmt.Errorf("parameter %q: %s needs at least one choice", p.Name, p.Kind)
		}
		seen := map[string]bool{}
		for _, c := range p.Choices {
			k := valueKey(c)
			if seen[k] {
				return fmt.Errorf("parameter %q: choice %v appears twice", p.Name, c)
			}
			seen[k] = true
			if p.Kind == KindPipeline {
				if s, ok := c.(string); !ok || strings.TrimSpace(s) == "" {
					return fmt.Errorf("parameter %q: pipeline choice %v is not a pipeline text", p.Name, c)
				}
			}
		}
	case KindInt:
		if p.Step < 1 || p.Step != math.Trunc(p.Step) {
			return fmt.Errorf("parameter %q: step %v must be a positive integer", p.Name, p.Step)
		}
		if p.Low != math.Trunc(p.Low) || p.High != math.Trunc(p.High) {
			return fmt.Errorf("parameter %q: bounds %v..%v must be integers", p.Name, p.Low, p.High)
		}
		if p.High < p.Low {
			return fmt.Errorf("parameter %q: high %v is below low %v", p.Name, p.High, p.Low)
		}
		if (p.High-p.Low)/p.Step >= 1<<40 {
			return fmt.Errorf("parameter %q: %v..%v step %v has too many values; use a real range", p.Name, p.Low, p.High, p.Step)
		}
		if p.Log && (p.Low < 1 || p.Step != 1) {
			return fmt.Errorf("parameter %q: a log-scaled int range needs low ≥ 1 and step 1", p.Name)
		}
	case KindReal:
		if math.IsNaN(p.Low) || math.IsNaN(p.High) || math.IsInf(p.Low, 0) || math.IsInf(p.High, 0) {
			return fmt.Errorf("parameter %q: bounds must be finite", p.Name)
		}
		if p.High < p.Low {
			return fmt.Errorf("parameter %q: high %v is below low %v", p.Name, p.High, p.Low)
		}
		if p.Log && p.Low <= 0 {
			return fmt.Errorf("parameter %q: a log-scaled range needs low > 0", p.Name)
		}
	default:
		return fmt.Errorf("parameter %q: unknown kind %q (want fixed, bool, categorical, int, real or pipeline)", p.Name, p.Kind)
	}
	return nil
}

// Finite reports whether the parameter has a countable set of values.
func (p Param) Finite() bool { return p.Kind != KindReal || p.Low == p.High }

// Cardinality is the number of values of a finite parameter (0 for a real range).
func (p Param) Cardinality() int {
	switch p.Kind {
	case KindInt:
		return int((p.High-p.Low)/p.Step) + 1
	case KindReal:
		if p.Low == p.High {
			return 1
		}
		return 0
	default:
		return len(p.Choices)
	}
}

// ValueAt is the i-th value of a finite parameter, in its natural order.
func (p Param) ValueAt(i int) any {
	switch p.Kind {
	case KindInt:
		return int(p.Low + float64(i)*p.Step)
	case KindReal:
		return p.Low
	default:
		return p.Choices[i]
	}
}

// IndexOf finds v among the values of a finite parameter.
func (p Param) IndexOf(v any) (int, bool) {
	switch p.Kind {
	case KindInt:
		f, ok := toFloat(v)
		if !ok {
			return 0, false
		}
		i := (f - p.Low) / p.Step
		if i < 0 || i != math.Trunc(i) || f > p.High {
			return 0, false
		}
		return int(i), true
	case KindReal:
		return 0, p.Low == p.High
	default:
		k := valueKey(v)
		for i, c := range p.Choices {
			if valueKey(c) == k {
				return i, true
			}
		}
		return 0, false
	}
}

// Point is one sampled assignment of values to parameter names.
type Point map[string]any

// Key is a canonical text of the point (sorted names, typed values) used to
// recognize repeats.
func (pt Point) Key() string {
	names := make([]string, 0, len(pt))
	for n := range pt {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		b.WriteString(n)
		b.WriteByte('=')
		b.WriteString(valueKey(pt[n]))
		b.WriteByte(';')
	}
	return b.String()
}

// valueKey renders a value so that equal values of compatible types (an int
// read back from JSON as float64, say) give the same text.
func valueKey(v any) string {
	if f, ok := toFloat(v); ok {
		return "n:" + strconv.FormatFloat(f, 'g', -1, 64)
	}
	switch x := v.(type) {
	case bool:
		return "b:" + strconv.FormatBool(x)
	case string:
		return "s:" + x
	}
	return fmt.Sprintf("?:%v", v)
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int32:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint32:
		return float64(x), true
	case uint64:
		return float64(x), true
	case float64:
		return x, true
	case float32:
		return float64(x), true
	}
	return 0, false
}
