package db

import (
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/internal/keytest"
)

// launchInputs are everything DynamicHash reads.
type launchInputs struct {
	Grid, Block mneme.Dim3
	Shared      uint32
	Arg0, Arg1  []byte
}

func (in launchInputs) hash() string {
	return DynamicHash(in.Grid, in.Block, in.Shared, [][]byte{in.Arg0, in.Arg1})
}

// Each input of a launch's dynamic hash changed alone gives another
// instance: every dimension of grid and block, shared memory, and each
// argument's bytes; equal launches give one instance.
func TestDynamicHashEachInputAlone(t *testing.T) {
	base := launchInputs{Grid: mneme.Dim3{X: 4, Y: 5, Z: 6}, Block: mneme.Dim3{X: 64, Y: 2, Z: 3}, Shared: 512,
		Arg0: []byte{1, 0, 0, 0}, Arg1: []byte{0, 0, 0x40, 0x15, 0, 0, 0, 0}}
	seen := map[string]string{base.hash(): "base"}
	if base.hash() != (launchInputs{Grid: base.Grid, Block: base.Block, Shared: 512,
		Arg0: []byte{1, 0, 0, 0}, Arg1: []byte{0, 0, 0x40, 0x15, 0, 0, 0, 0}}).hash() {
		t.Error("equal launches gave two instances")
	}
	for _, v := range keytest.EachLeaf(base) {
		h := v.Value.hash()
		if prev, ok := seen[h]; ok {
			t.Errorf("changing %s alone gives the hash of %s", v.Path, prev)
		}
		seen[h] = v.Path
	}
	// Grid and block swapped, dimensions rotated, arguments swapped or
	// split elsewhere, one argument more: each another instance.
	for name, in := range map[string]launchInputs{
		"grid and block swapped": {Grid: base.Block, Block: base.Grid, Shared: base.Shared, Arg0: base.Arg0, Arg1: base.Arg1},
		"grid rotated":           {Grid: mneme.Dim3{X: 5, Y: 6, Z: 4}, Block: base.Block, Shared: base.Shared, Arg0: base.Arg0, Arg1: base.Arg1},
		"arguments swapped":      {Grid: base.Grid, Block: base.Block, Shared: base.Shared, Arg0: base.Arg1, Arg1: base.Arg0},
		"boundary moved":         {Grid: base.Grid, Block: base.Block, Shared: base.Shared, Arg0: []byte{1, 0, 0, 0, 0}, Arg1: []byte{0, 0x40, 0x15, 0, 0, 0, 0}},
	} {
		h := in.hash()
		if prev, ok := seen[h]; ok {
			t.Errorf("%s gives the hash of %s", name, prev)
		}
		seen[h] = name
	}
	if DynamicHash(base.Grid, base.Block, base.Shared, [][]byte{base.Arg0}) == DynamicHash(base.Grid, base.Block, base.Shared, [][]byte{base.Arg0, nil}) {
		t.Error("an empty argument more gives the same instance")
	}
}

// A kernel's static hash changes with its name and with its IR, each
// alone; equal inputs give one kernel. A fat binary's file name follows its
// bytes.
func TestStaticHashAndDeviceCodeNameEachInputAlone(t *testing.T) {
	base := StaticHash("_Z1kPf", []byte("bitcode"))
	if StaticHash("_Z1kPf", []byte("bitcode")) != base {
		t.Error("equal kernels gave two static hashes")
	}
	for name, h := range map[string]string{
		"name":       StaticHash("_Z1kPd", []byte("bitcode")),
		"longer IR":  StaticHash("_Z1kPf", []byte("bitcodes")),
		"IR byte":    StaticHash("_Z1kPf", []byte("bitcodf")),
		"no IR":      StaticHash("_Z1kPf", nil),
		"empty name": StaticHash("", []byte("bitcode")),
	} {
		if h == base {
			t.Errorf("changing the %s alone keeps the static hash", name)
		}
	}
	a, b := DeviceCodeFileName([]byte("image one")), DeviceCodeFileName([]byte("image two"))
	if a == b || a != DeviceCodeFileName([]byte("image one")) {
		t.Errorf("fat binary names %s and %s", a, b)
	}
}
