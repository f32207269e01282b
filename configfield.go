package mneme

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
)

// ValueKind says what kind of value sets a configuration field, whether it
// comes from a search space's expression, a preset's parameter or a flag.
type ValueKind int

// Value kinds of the configuration's fields.
const (
	// ValueDim3 is a shape: a Dim3, a text "X[,Y[,Z]]" or a list of up to
	// three positive integers. Its components are set one by one as
	// "<key>.x", "<key>.y" and "<key>.z".
	ValueDim3 ValueKind = iota
	// ValueUint is a non-negative integer that fits in 32 bits.
	ValueUint
	// ValueInt is an integer; a sampled one must also be non-negative and
	// fit in 32 bits, the bounds of the field are checked by Validate.
	ValueInt
	// ValueBool is true or false.
	ValueBool
	// ValueString is a non-empty text.
	ValueString
	// ValueInts is a list of non-negative integers.
	ValueInts
)

var valueKindNames = [...]string{"dim3", "uint", "int", "bool", "string", "ints"}

func (k ValueKind) String() string {
	if k >= 0 && int(k) < len(valueKindNames) {
		return valueKindNames[k]
	}
	return "ValueKind(" + strconv.Itoa(int(k)) + ")"
}

// IntBounds are the values Validate accepts for an integer field.
type IntBounds struct {
	Min, Max int
	// Rule is the error's wording when it is not "must be Min..Max".
	Rule string
}

// ConfigField describes one field of Config: its key, the kind of value
// that sets it, its bounds, and how to read and set it.
type ConfigField struct {
	// Key is the field's name in JSON and YAML, in search spaces and flags.
	Key string
	// Kind is the kind of value Set accepts.
	Kind ValueKind
	// Tunable fields may be set by a search space; the others (the target)
	// follow the device.
	Tunable bool
	// Doc says what the field means, for listings and help texts.
	Doc string
	// Want names the expected value in errors, when the kind alone says too
	// little (a pipeline text, a target).
	Want string
	// Bounds, when set, are the values Validate accepts.
	Bounds *IntBounds

	field func(*Config) any  // a pointer to the field in c
	check func(Config) error // rules beyond Bounds, some across fields
}

// FieldError is a bad value for a configuration field; it names the key.
type FieldError struct {
	Key string
	Err error
}

func (e *FieldError) Error() string { return e.Key + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// ConfigFields returns the table of the configuration's fields, in the order
// of the struct. The slice is a copy.
func ConfigFields() []ConfigField { return append([]ConfigField(nil), configFields...) }

// LookupConfigField finds the field with the given key.
func LookupConfigField(key string) (ConfigField, bool) {
	for _, f := range configFields {
		if f.Key == key {
			return f, true
		}
	}
	return ConfigField{}, false
}

// dimComponents are the components of a shape field, as settable names take
// them after the key ("block.x").
var dimComponents = []string{"x", "y", "z"}

// TunableKeys lists what a search space may set, in table order: the key of
// every tunable field, except that a shape is set per component ("grid.x").
func TunableKeys() []string {
	var out []string
	for _, f := range configFields {
		if !f.Tunable {
			continue
		}
		if f.Kind == ValueDim3 {
			for _, c := range dimComponents {
				out = append(out, f.Key+"."+c)
			}
			continue
		}
		out = append(out, f.Key)
	}
	return out
}

// GoType is the type of the struct field.
func (f ConfigField) GoType() reflect.Type {
	var c Config
	return reflect.TypeOf(f.field(&c)).Elem()
}

// Get returns the field's value in c.
func (f ConfigField) Get(c Config) any {
	return reflect.ValueOf(f.field(&c)).Elem().Interface()
}

// Set stores v in the field of c. Numbers may come as any Go number type
// (JSON and expressions give float64); they must be integers where the field
// is. A bad value gives a *FieldError naming the key, and c is unchanged.
func (f ConfigField) Set(c *Config, v any) error {
	if err := f.set(c, v); err != nil {
		return &FieldError{Key: f.Key, Err: err}
	}
	return nil
}

func (f ConfigField) set(c *Config, v any) error {
	switch p := f.field(c).(type) {
	case *Dim3:
		d, err := dimValue(v)
		if err != nil {
			return err
		}
		*p = d
	case *uint32:
		n, err := uintValue(v, 0)
		if err != nil {
			return err
		}
		*p = n
	case *int:
		n, err := uintValue(v, 0)
		if err != nil {
			return err
		}
		*p = int(n)
	case *bool:
		b, ok := v.(bool)
		if !ok {
			return fmt.Errorf("gave %v (%T), want true or false", v, v)
		}
		*p = b
	case *string:
		s, ok := v.(string)
		if !ok || strings.TrimSpace(s) == "" {
			want := f.Want
			if want == "" {
				want = "a non-empty text"
			}
			return fmt.Errorf("gave %v (%T), want %s", v, v, want)
		}
		*p = s
	case *[]int:
		list, err := indexList(v)
		if err != nil {
			return err
		}
		*p = list
	default:
		return fmt.Errorf("field of type %T has no setter", p)
	}
	return nil
}

// Set stores v in the field named by key: a key of the table, or a shape's
// component ("block.x", which must be at least 1). Errors name the key.
func (c *Config) Set(key string, v any) error {
	if f, ok := LookupConfigField(key); ok {
		return f.Set(c, v)
	}
	base, comp, found := strings.Cut(key, ".")
	if f, ok := LookupConfigField(base); ok && found && f.Kind == ValueDim3 {
		d := f.field(c).(*Dim3)
		n, err := uintValue(v, 1)
		if err != nil {
			return &FieldError{Key: key, Err: err}
		}
		switch comp {
		case "x":
			d.X = n
		case "y":
			d.Y = n
		case "z":
			d.Z = n
		default:
			return &FieldError{Key: key, Err: fmt.Errorf("unknown component %q (want x, y or z)", comp)}
		}
		return nil
	}
	return &FieldError{Key: key, Err: errors.New("unknown configuration field")}
}

// validate applies the field's bounds and rules to c.
func (f ConfigField) validate(c Config) error {
	if f.Bounds != nil {
		if n, ok := f.Get(c).(int); ok && (n < f.Bounds.Min || n > f.Bounds.Max) {
			rule := f.Bounds.Rule
			if rule == "" {
				rule = fmt.Sprintf("must be %d..%d", f.Bounds.Min, f.Bounds.Max)
			}
			return fmt.Errorf("%s %d: %s", f.Key, n, rule)
		}
	}
	if f.check != nil {
		return f.check(c)
	}
	return nil
}

// numberValue reads any Go number as a float64.
func numberValue(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int8:
		return float64(x), true
	case int16:
		return float64(x), true
	case int32:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint:
		return float64(x), true
	case uint8:
		return float64(x), true
	case uint16:
		return float64(x), true
	case uint32:
		return float64(x), true
	case uint64:
		return float64(x), true
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// uintValue reads a whole number in min..MaxUint32.
func uintValue(v any, min uint32) (uint32, error) {
	f, ok := numberValue(v)
	if !ok {
		return 0, fmt.Errorf("gave %v (%T), want a number", v, v)
	}
	if f != math.Trunc(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("gave %v, want an integer", f)
	}
	if f < 0 || f > math.MaxUint32 {
		return 0, fmt.Errorf("gave %v, out of range", f)
	}
	if f < float64(min) {
		return 0, fmt.Errorf("gave %v, want at least %d", f, min)
	}
	return uint32(f), nil
}

// indexList reads a list of non-negative integers.
func indexList(v any) ([]int, error) {
	var items []any
	switch x := v.(type) {
	case []any:
		items = x
	case []int:
		for _, i := range x {
			items = append(items, i)
		}
	default:
		return nil, fmt.Errorf("gave %v (%T), want a list of argument indices", v, v)
	}
	var out []int
	for _, x := range items {
		f, ok := numberValue(x)
		if !ok || f < 0 || f != math.Trunc(f) || f > math.MaxInt32 {
			return nil, fmt.Errorf("argument index %v is not a non-negative integer", x)
		}
		out = append(out, int(f))
	}
	return out, nil
}

// dimValue reads a shape from a Dim3, a text "X[,Y[,Z]]" or a list of up to
// three positive integers (missing components are 1).
func dimValue(v any) (Dim3, error) {
	switch x := v.(type) {
	case Dim3:
		return x, nil
	case string:
		return ParseDim3(x)
	case []any:
		if len(x) == 0 || len(x) > 3 {
			return Dim3{}, fmt.Errorf("gave %d components, want 1 to 3", len(x))
		}
		d := [3]uint32{1, 1, 1}
		for i, c := range x {
			n, err := uintValue(c, 1)
			if err != nil {
				return Dim3{}, fmt.Errorf("component %d: %w", i+1, err)
			}
			d[i] = n
		}
		return Dim3{d[0], d[1], d[2]}, nil
	}
	return Dim3{}, fmt.Errorf("gave %v (%T), want X[,Y[,Z]] or a list of up to three integers", v, v)
}
