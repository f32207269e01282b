package keytest

import (
	"reflect"
	"testing"
)

type inner struct{ X, Y uint32 }

type sample struct {
	S      string
	B      bool
	I      int
	F      float64
	In     inner
	Ints   []int
	Bytes  []byte
	Any    []any
	hidden int // unexported: left alone
}

// Every exported leaf gets one variant that differs from the original in
// that field alone.
func TestEachLeafChangesOneFieldAtATime(t *testing.T) {
	base := sample{S: "a", I: 3, hidden: 7, Ints: []int{1}, Bytes: []byte{2}, In: inner{X: 1, Y: 1}, Any: []any{1}}
	vs := EachLeaf(base)
	var paths []string
	for _, v := range vs {
		paths = append(paths, v.Path)
		if reflect.DeepEqual(v.Value, base) {
			t.Errorf("%s: unchanged", v.Path)
		}
		// Put the one field back: the rest must equal the original.
		back := v.Value
		switch v.Path {
		case "S":
			back.S = base.S
		case "B":
			back.B = base.B
		case "I":
			back.I = base.I
		case "F":
			back.F = base.F
		case "In.X":
			back.In.X = base.In.X
		case "In.Y":
			back.In.Y = base.In.Y
		case "Ints":
			back.Ints = base.Ints
		case "Bytes":
			back.Bytes = base.Bytes
		case "Any":
			back.Any = base.Any
		}
		if !reflect.DeepEqual(back, base) {
			t.Errorf("%s: changed more than itself: %+v", v.Path, v.Value)
		}
	}
	want := []string{"S", "B", "I", "F", "In.X", "In.Y", "Ints", "Bytes", "Any"}
	if !reflect.DeepEqual(paths, want) {
		t.Errorf("paths %v, want %v", paths, want)
	}
	for _, v := range vs {
		if v.Value.hidden != 7 {
			t.Errorf("%s: the unexported field changed", v.Path)
		}
	}
	// The original's slices are not shared with a variant's.
	if len(base.Ints) != 1 || len(base.Bytes) != 1 {
		t.Errorf("original changed: %+v", base)
	}
}

func TestEachLeafRefusesWhatItCannotChange(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("a map field was skipped silently")
		}
	}()
	EachLeaf(struct{ M map[string]int }{})
}
