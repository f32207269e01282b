package db

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/internal/jsonfield"
	"github.com/mneme-gpu/mneme/internal/safefile"
)

// ManagedFileName is the file of a database listing the managed allocations
// (cudaMallocManaged) the application made while it was recorded, and its
// __managed__ variables. Managed memory lives outside the recording arena
// and is not in any snapshot, so replay refuses a launch whose arguments
// point into it, or whose kernel reads a __managed__ variable, instead of
// running the kernel on memory nothing restores.
const ManagedFileName = ".mneme-record.managed" // JSON; not *.json, which names kernel files

// MaxManagedAllocations bounds the list: past it, the recorder keeps the
// count only (ManagedList.Dropped) and replay cannot name every one.
const MaxManagedAllocations = 4096

// ManagedAllocation is one managed allocation: its address and size.
type ManagedAllocation struct {
	Addr string `json:"addr"` // hex, as VAddr
	Size uint64 `json:"size"`
}

// MaxManagedVariables bounds the __managed__ variables listed: past it,
// the recorder keeps the count only (ManagedList.DroppedVariables).
const MaxManagedVariables = 4096

// maxManagedVariableName bounds a variable's name (a mangled C++ name).
const maxManagedVariableName = 4096

// ManagedVariable is one __managed__ variable of the application, as its
// registration (__cudaRegisterManagedVar) names it: the device-side name,
// its size and, when the runtime had placed it while the application was
// recorded, its address.
type ManagedVariable struct {
	Name string `json:"name"`
	Size uint64 `json:"size"`
	Addr string `json:"addr,omitempty"` // hex, as VAddr; "" when unknown
}

// ManagedList is the content of ManagedFileName.
type ManagedList struct {
	Allocations []ManagedAllocation `json:"allocations"`
	// Dropped counts the allocations past MaxManagedAllocations.
	Dropped int64 `json:"dropped,omitempty"`
	// Variables are the application's __managed__ variables, in the order
	// the recorder first saw them.
	Variables []ManagedVariable `json:"variables,omitempty"`
	// DroppedVariables counts the variables past MaxManagedVariables.
	DroppedVariables int64 `json:"dropped_variables,omitempty"`
}

// AddVariable lists a __managed__ variable once (by name), or counts it in
// DroppedVariables past MaxManagedVariables. addr 0 is unknown. It reports
// whether the list changed.
func (l *ManagedList) AddVariable(name string, size, addr uint64) bool {
	for i, v := range l.Variables {
		if v.Name == name {
			if v.Addr == "" && addr != 0 {
				l.Variables[i].Addr = FormatVAddr(addr)
				return true
			}
			return false
		}
	}
	if len(l.Variables) >= MaxManagedVariables {
		l.DroppedVariables++
		return true
	}
	v := ManagedVariable{Name: name, Size: size}
	if addr != 0 {
		v.Addr = FormatVAddr(addr)
	}
	l.Variables = append(l.Variables, v)
	return true
}

// Variable finds the listed __managed__ variable named name.
func (l *ManagedList) Variable(name string) (ManagedVariable, bool) {
	for _, v := range l.Variables {
		if v.Name == name {
			return v, true
		}
	}
	return ManagedVariable{}, false
}

// Add lists one managed allocation, or counts it in Dropped past
// MaxManagedAllocations.
func (l *ManagedList) Add(addr, size uint64) {
	if len(l.Allocations) >= MaxManagedAllocations {
		l.Dropped++
		return
	}
	l.Allocations = append(l.Allocations, ManagedAllocation{Addr: FormatVAddr(addr), Size: size})
}

// WriteManaged writes the list into the database directory dir, replacing
// the previous one atomically.
func WriteManaged(dir string, l *ManagedList) error {
	data, err := json.Marshal(l)
	if err != nil {
		return err
	}
	return ReplaceFile(filepath.Join(dir, ManagedFileName), append(data, '\n'))
}

// ReadManaged reads the managed allocations of the database in dir: none
// when the file does not exist (no managed allocation was made). A file that
// is malformed is bad input naming the file and field.
func ReadManaged(dir string) (*ManagedList, error) {
	path := filepath.Join(dir, ManagedFileName)
	data, err := safefile.ReadFileIn(dir, ManagedFileName, 1<<20)
	if errors.Is(err, os.ErrNotExist) {
		return &ManagedList{}, nil
	}
	if err != nil {
		return nil, err
	}
	if err := jsonfield.Check(data); err != nil {
		return nil, mneme.BadInput(fmt.Errorf("%s: %w", path, err))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var l ManagedList
	if err := dec.Decode(&l); err != nil {
		return nil, mneme.BadInput(fmt.Errorf("%s: not a list of managed allocations: %v", path, err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, mneme.BadInput(fmt.Errorf("%s: data after the object", path))
	}
	if len(l.Allocations) > MaxManagedAllocations {
		return nil, mneme.BadInput(fmt.Errorf("%s: allocations: %d, more than %d", path, len(l.Allocations), MaxManagedAllocations))
	}
	for i, a := range l.Allocations {
		addr, err := parseHexAddr(a.Addr)
		if err != nil || a.Size == 0 || addr+a.Size < addr {
			return nil, mneme.BadInput(fmt.Errorf("%s: allocations[%d]: %q of %d bytes is not an address range", path, i, a.Addr, a.Size))
		}
	}
	if len(l.Variables) > MaxManagedVariables {
		return nil, mneme.BadInput(fmt.Errorf("%s: variables: %d, more than %d", path, len(l.Variables), MaxManagedVariables))
	}
	if l.Dropped < 0 || l.DroppedVariables < 0 {
		return nil, mneme.BadInput(fmt.Errorf("%s: dropped: a negative count", path))
	}
	seen := make(map[string]bool, len(l.Variables))
	for i, v := range l.Variables {
		if err := checkVariableName(v.Name); err != nil {
			return nil, mneme.BadInput(fmt.Errorf("%s: variables[%d].name: %v", path, i, err))
		}
		if seen[v.Name] {
			return nil, mneme.BadInput(fmt.Errorf("%s: variables[%d].name: %q is listed twice", path, i, v.Name))
		}
		seen[v.Name] = true
		if v.Addr != "" {
			addr, err := parseHexAddr(v.Addr)
			if err != nil || addr+v.Size < addr {
				return nil, mneme.BadInput(fmt.Errorf("%s: variables[%d].addr: %q of %d bytes is not an address range", path, i, v.Addr, v.Size))
			}
		}
	}
	return &l, nil
}

// checkVariableName accepts a symbol name: not empty, bounded, printable
// ASCII (a mangled name is), so that it can be shown as it is.
func checkVariableName(name string) error {
	if name == "" || len(name) > maxManagedVariableName {
		return fmt.Errorf("%d bytes, want 1 to %d", len(name), maxManagedVariableName)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("%q: byte %d is not a printable ASCII character", name, i)
		}
	}
	return nil
}

// parseHexAddr reads a 0x-prefixed hex address, as FormatVAddr writes it.
func parseHexAddr(s string) (uint64, error) {
	return (&Kernel{VAddr: s}).ParseVAddr()
}

// ManagedArgument is a launch argument that points into managed memory.
type ManagedArgument struct {
	Arg        int    // the argument's 0-based index
	Name       string // its name, "" when the kernel file has none
	Addr       uint64 // the pointer's value
	Allocation ManagedAllocation
	// Variable names the __managed__ variable the pointer points into, ""
	// when it points into an allocation (Allocation).
	Variable string
}

func (m ManagedArgument) String() string {
	name := ""
	if m.Name != "" {
		name = " (" + m.Name + ")"
	}
	if m.Variable != "" {
		return fmt.Sprintf("argument %d%s = 0x%x points into the __managed__ variable %s at %s (%d bytes)", m.Arg, name, m.Addr, m.Variable, m.Allocation.Addr, m.Allocation.Size)
	}
	return fmt.Sprintf("argument %d%s = 0x%x points into the managed allocation at %s (%d bytes)", m.Arg, name, m.Addr, m.Allocation.Addr, m.Allocation.Size)
}

// ManagedArguments lists the arguments of instance inst of kernel k that
// point into an allocation of l or a __managed__ variable whose address it
// knows: every pointer argument, and every aligned 8-byte word of an
// argument passed by value (a struct may carry pointers).
func ManagedArguments(k *Kernel, inst *Instance, l *ManagedList) ([]ManagedArgument, error) {
	type span struct {
		lo, hi   uint64
		a        ManagedAllocation
		variable string
	}
	spans := make([]span, 0, len(l.Allocations)+len(l.Variables))
	for _, a := range l.Allocations {
		addr, err := parseHexAddr(a.Addr)
		if err != nil {
			return nil, err
		}
		spans = append(spans, span{addr, addr + a.Size, a, ""})
	}
	for _, v := range l.Variables {
		if v.Addr == "" || v.Size == 0 {
			continue
		}
		addr, err := parseHexAddr(v.Addr)
		if err != nil {
			return nil, err
		}
		spans = append(spans, span{addr, addr + v.Size, ManagedAllocation{Addr: v.Addr, Size: v.Size}, v.Name})
	}
	if len(spans) == 0 {
		return nil, nil
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].lo < spans[j].lo })
	find := func(p uint64) (span, bool) {
		// Ranges may overlap (a variable the recording also saw allocated):
		// look back from the last range starting at or below p.
		for i := sort.Search(len(spans), func(i int) bool { return spans[i].lo > p }) - 1; i >= 0; i-- {
			if p < spans[i].hi {
				return spans[i], true
			}
		}
		return span{}, false
	}
	args, err := inst.ArgBytes()
	if err != nil {
		return nil, err
	}
	var out []ManagedArgument
	for i, b := range args {
		for off := 0; off+8 <= len(b); off += 8 {
			p := binary.LittleEndian.Uint64(b[off:])
			if s, ok := find(p); ok {
				m := ManagedArgument{Arg: i, Addr: p, Allocation: s.a, Variable: s.variable}
				if i < len(k.ArgNames) {
					m.Name = k.ArgNames[i]
				}
				out = append(out, m)
				break
			}
		}
	}
	return out, nil
}
