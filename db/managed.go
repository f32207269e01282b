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
// (cudaMallocManaged) the application made while it was recorded. Managed
// memory lives outside the recording arena and is not in any snapshot, so
// replay refuses a launch whose arguments point into it instead of running
// the kernel on addresses nothing backs.
const ManagedFileName = ".mneme-record.managed" // JSON; not *.json, which names kernel files

// MaxManagedAllocations bounds the list: past it, the recorder keeps the
// count only (ManagedList.Dropped) and replay cannot name every one.
const MaxManagedAllocations = 4096

// ManagedAllocation is one managed allocation: its address and size.
type ManagedAllocation struct {
	Addr string `json:"addr"` // hex, as VAddr
	Size uint64 `json:"size"`
}

// ManagedList is the content of ManagedFileName.
type ManagedList struct {
	Allocations []ManagedAllocation `json:"allocations"`
	// Dropped counts the allocations past MaxManagedAllocations.
	Dropped int64 `json:"dropped,omitempty"`
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
	return &l, nil
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
}

func (m ManagedArgument) String() string {
	name := ""
	if m.Name != "" {
		name = " (" + m.Name + ")"
	}
	return fmt.Sprintf("argument %d%s = 0x%x points into the managed allocation at %s (%d bytes)", m.Arg, name, m.Addr, m.Allocation.Addr, m.Allocation.Size)
}

// ManagedArguments lists the arguments of instance inst of kernel k that
// point into an allocation of l: every pointer argument, and every aligned
// 8-byte word of an argument passed by value (a struct may carry pointers).
func ManagedArguments(k *Kernel, inst *Instance, l *ManagedList) ([]ManagedArgument, error) {
	if len(l.Allocations) == 0 {
		return nil, nil
	}
	type span struct {
		lo, hi uint64
		a      ManagedAllocation
	}
	spans := make([]span, 0, len(l.Allocations))
	for _, a := range l.Allocations {
		addr, err := parseHexAddr(a.Addr)
		if err != nil {
			return nil, err
		}
		spans = append(spans, span{addr, addr + a.Size, a})
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].lo < spans[j].lo })
	find := func(p uint64) (ManagedAllocation, bool) {
		i := sort.Search(len(spans), func(i int) bool { return spans[i].lo > p }) - 1
		if i >= 0 && p < spans[i].hi {
			return spans[i].a, true
		}
		return ManagedAllocation{}, false
	}
	args, err := inst.ArgBytes()
	if err != nil {
		return nil, err
	}
	var out []ManagedArgument
	for i, b := range args {
		for off := 0; off+8 <= len(b); off += 8 {
			p := binary.LittleEndian.Uint64(b[off:])
			if a, ok := find(p); ok {
				m := ManagedArgument{Arg: i, Addr: p, Allocation: a}
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
