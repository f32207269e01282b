package db

import (
	"encoding/binary"
	"errors"
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
	})
}
