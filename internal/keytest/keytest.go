// Package keytest changes one input of a key at a time, for the tests of
// cache keys, content hashes and configuration hashes: a key that leaves out
// a member of its input (the block but not the grid, say) shows up as a
// changed input that keeps the key.
package keytest

import (
	"fmt"
	"reflect"
)

// Variant is a copy of a value with one leaf field changed.
type Variant[T any] struct {
	// Path names the changed field, as Field or Outer.Inner.
	Path  string
	Value T
}

// EachLeaf returns one copy of v per leaf field (a string, bool, number or
// slice; structs are entered), each with that field alone changed to another
// value: strings and slices grow by one element, numbers grow by one,
// booleans flip, an interface holds a string. Unexported fields are left alone. It panics on a kind it
// cannot change (a map, a pointer), so a new field of such a kind makes the
// tests that use it fail loudly rather than skip it.
func EachLeaf[T any](v T) []Variant[T] {
	var out []Variant[T]
	var walk func(path string, get func(reflect.Value) reflect.Value, t reflect.Type)
	walk = func(path string, get func(reflect.Value) reflect.Value, t reflect.Type) {
		if t.Kind() == reflect.Struct {
			for i := 0; i < t.NumField(); i++ {
				f := t.Field(i)
				if !f.IsExported() {
					continue
				}
				p := f.Name
				if path != "" {
					p = path + "." + f.Name
				}
				walk(p, func(r reflect.Value) reflect.Value { return get(r).Field(i) }, f.Type)
			}
			return
		}
		c := v
		root := reflect.ValueOf(&c).Elem()
		Change(get(root), path)
		out = append(out, Variant[T]{Path: path, Value: c})
	}
	walk("", func(r reflect.Value) reflect.Value { return r }, reflect.TypeOf(v))
	return out
}

// Change sets the settable f to another value of its kind, as EachLeaf
// does; path names it in a panic.
func Change(f reflect.Value, path string) {
	switch f.Kind() {
	case reflect.String:
		f.SetString(f.String() + "x")
	case reflect.Bool:
		f.SetBool(!f.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		f.SetInt(f.Int() + 1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		f.SetUint(f.Uint() + 1)
	case reflect.Float32, reflect.Float64:
		f.SetFloat(f.Float() + 1)
	case reflect.Interface:
		// A value of any kind: the text of the old one and an x, a string
		// no number or boolean equals.
		f.Set(reflect.ValueOf(fmt.Sprint(f.Interface()) + "x"))
	case reflect.Slice:
		n := reflect.MakeSlice(f.Type(), f.Len(), f.Len()+1)
		reflect.Copy(n, f)
		e := reflect.New(f.Type().Elem()).Elem()
		if e.Kind() != reflect.Struct {
			Change(e, path+"[]")
		}
		f.Set(reflect.Append(n, e))
	case reflect.Pointer:
		// nil becomes a pointer to the zero value (set differs from unset);
		// a set pointer becomes one to a changed copy, the original kept.
		n := reflect.New(f.Type().Elem())
		if !f.IsNil() {
			n.Elem().Set(f.Elem())
			Change(n.Elem(), path)
		}
		f.Set(n)
	default:
		panic(fmt.Sprintf("keytest: field %s: cannot change a %s", path, f.Kind()))
	}
}
