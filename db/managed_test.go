package db

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme"
)

// TestManagedArgumentsFindsPointersIntoManagedMemory: a pointer argument,
// or a pointer word of a struct passed by value, inside an allocation is
// found (first byte in, one past the end out); other arguments are not.
func TestManagedArgumentsFindsPointersIntoManagedMemory(t *testing.T) {
	const base, size = 0x7f0000001000, 0x1000
	u64 := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	k := &Kernel{ArgNames: []string{"p", "s", "n", "q"}}
	inst := &Instance{Args: EncodeArgs([][]byte{
		u64(base + size),                          // p: one past the end
		append(u64(7), u64(base+size-1)...),       // s: a struct whose second word points in
		binary.LittleEndian.AppendUint32(nil, 12), // n: an int
		u64(base), // q: the first byte
	})}
	l := &ManagedList{Allocations: []ManagedAllocation{{Addr: FormatVAddr(base), Size: size}}}
	hits, err := ManagedArguments(k, inst, l)
	if err != nil || len(hits) != 2 || hits[0].Arg != 1 || hits[0].Name != "s" || hits[0].Addr != base+size-1 || hits[1].Arg != 3 {
		t.Fatalf("hits %+v, %v", hits, err)
	}
	if !strings.Contains(hits[1].String(), "argument 3 (q) = 0x7f0000001000 points into the managed allocation at 0x7f0000001000 (4096 bytes)") {
		t.Errorf("message %q", hits[1])
	}
	if hits, err := ManagedArguments(k, inst, &ManagedList{}); err != nil || hits != nil {
		t.Errorf("no managed allocations: %+v %v", hits, err)
	}
}

func TestReadManaged(t *testing.T) {
	dir := t.TempDir()
	if l, err := ReadManaged(dir); err != nil || len(l.Allocations) != 0 {
		t.Fatalf("no file: %+v %v", l, err)
	}
	want := &ManagedList{Allocations: []ManagedAllocation{{Addr: "0x7f0000000000", Size: 64}}, Dropped: 2}
	if err := WriteManaged(dir, want); err != nil {
		t.Fatal(err)
	}
	if l, err := ReadManaged(dir); err != nil || len(l.Allocations) != 1 || l.Allocations[0] != want.Allocations[0] || l.Dropped != 2 {
		t.Fatalf("round trip: %+v %v", l, err)
	}
	for text, field := range map[string]string{
		`{"allocations":[{"addr":"0x10","size":0}]}`:               "allocations[0]",
		`{"allocations":[{"addr":"0xffffffffffffffff","size":2}]}`: "allocations[0]",
		`{"allocations":[{"addr":"16","size":2}]}`:                 "allocations[0]",
		`{"allocations":[],"extra":1}`:                             "extra",
		`{"allocations":[],"allocations":[]}`:                      "allocations",
		`{"allocations":[]} {}`:                                    "data after the object",
		`[1]`:                                                      "not a list of managed allocations",
	} {
		os.WriteFile(filepath.Join(dir, ManagedFileName), []byte(text), 0o644)
		_, err := ReadManaged(dir)
		var in *mneme.InputError
		if !errors.As(err, &in) || !strings.Contains(err.Error(), ManagedFileName) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v, want bad input naming %q", text, err, field)
		}
	}
}

// FuzzReadManaged feeds arbitrary bytes as the managed-allocation list: an
// error names the file, an accepted list holds only valid ranges, and
// checking an instance against it never fails.
func FuzzReadManaged(f *testing.F) {
	f.Add([]byte(`{"allocations":[{"addr":"0x7f0000000000","size":64}],"dropped":1}`))
	f.Add([]byte(`{"allocations":[{"addr":"0x0","size":18446744073709551615}]}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"allocations":[],"variables":[{"name":"counter","size":4,"addr":"0x7f0000000000"},{"name":"_ZN2ns5tableE","size":64}],"dropped_variables":3}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, ManagedFileName), data, 0o644)
		l, err := ReadManaged(dir)
		if err != nil {
			if !strings.Contains(err.Error(), ManagedFileName) {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		inst := &Instance{Args: EncodeArgs([][]byte{binary.LittleEndian.AppendUint64(nil, 0x7f0000000010)})}
		if _, err := ManagedArguments(&Kernel{}, inst, l); err != nil {
			t.Fatalf("an accepted list failed the check: %v", err)
		}
		for _, v := range l.Variables {
			if checkVariableName(v.Name) != nil {
				t.Fatalf("accepted a variable name that is not printable: %q", v.Name)
			}
		}
	})
}

// TestManagedVariablesRoundTripAndRefusals: the __managed__ variables are
// written and read back; each malformed field is refused naming it.
func TestManagedVariablesRoundTripAndRefusals(t *testing.T) {
	dir := t.TempDir()
	var l ManagedList
	if !l.AddVariable("counter", 4, 0) || l.AddVariable("counter", 4, 0) || !l.AddVariable("counter", 4, 0x7f0000000100) || !l.AddVariable("_Z5tableE", 64, 0) {
		t.Fatalf("AddVariable changes: %+v", l)
	}
	if err := WriteManaged(dir, &l); err != nil {
		t.Fatal(err)
	}
	got, err := ReadManaged(dir)
	want := []ManagedVariable{{Name: "counter", Size: 4, Addr: "0x7f0000000100"}, {Name: "_Z5tableE", Size: 64}}
	if err != nil || len(got.Variables) != 2 || got.Variables[0] != want[0] || got.Variables[1] != want[1] {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	if v, ok := got.Variable("_Z5tableE"); !ok || v != want[1] {
		t.Errorf("Variable(_Z5tableE) = %+v %v", v, ok)
	}
	if _, ok := got.Variable("table"); ok {
		t.Error("Variable(table) found a variable of another name")
	}
	for text, field := range map[string]string{
		`{"allocations":[],"variables":[{"name":"","size":4}]}`:                              "variables[0].name",
		`{"allocations":[],"variables":[{"name":"a b","size":4}]}`:                           "variables[0].name",
		`{"allocations":[],"variables":[{"name":"x\u001b[31m","size":4}]}`:                   "variables[0].name",
		`{"allocations":[],"variables":[{"name":"x","size":4},{"name":"x","size":4}]}`:       "variables[1].name",
		`{"allocations":[],"variables":[{"name":"x","size":4,"addr":"12"}]}`:                 "variables[0].addr",
		`{"allocations":[],"variables":[{"name":"x","size":4,"addr":"0xfffffffffffffffe"}]}`: "variables[0].addr",
		`{"allocations":[],"variables":[{"name":"x","size":4,"extra":1}]}`:                   "extra",
		`{"allocations":[],"dropped_variables":-1}`:                                          "dropped",
	} {
		os.WriteFile(filepath.Join(dir, ManagedFileName), []byte(text), 0o644)
		_, err := ReadManaged(dir)
		var in *mneme.InputError
		if !errors.As(err, &in) || !strings.Contains(err.Error(), ManagedFileName) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v, want bad input naming %q", text, err, field)
		}
	}
}

// TestManagedVariableLimit: past MaxManagedVariables only the count grows.
func TestManagedVariableLimit(t *testing.T) {
	var l ManagedList
	for i := range MaxManagedVariables + 2 {
		l.AddVariable(fmt.Sprintf("v%d", i), 4, 0)
	}
	if len(l.Variables) != MaxManagedVariables || l.DroppedVariables != 2 {
		t.Errorf("%d listed, %d dropped", len(l.Variables), l.DroppedVariables)
	}
}

// TestManagedArgumentsFindsPointersIntoManagedVariables: a pointer to a
// __managed__ variable whose address is known is found and named; one to
// a variable of unknown address cannot be, and the next byte is outside.
func TestManagedArgumentsFindsPointersIntoManagedVariables(t *testing.T) {
	u64 := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	k := &Kernel{ArgNames: []string{"p", "q"}}
	inst := &Instance{Args: EncodeArgs([][]byte{u64(0x7f0000000103), u64(0x7f0000000104)})}
	var l ManagedList
	l.AddVariable("counter", 4, 0x7f0000000100)
	l.AddVariable("unplaced", 64, 0)
	hits, err := ManagedArguments(k, inst, &l)
	if err != nil || len(hits) != 1 || hits[0].Arg != 0 || hits[0].Variable != "counter" {
		t.Fatalf("hits %+v, %v", hits, err)
	}
	if want := "argument 0 (p) = 0x7f0000000103 points into the __managed__ variable counter at 0x7f0000000100 (4 bytes)"; hits[0].String() != want {
		t.Errorf("message %q, want %q", hits[0], want)
	}
}
