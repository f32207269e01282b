// Package db is the recording database: the per-kernel JSON files
// (<static-hash>.json, keys compatible with LLNL Mneme's), the device-memory
// snapshot files and the naming of the files in a database directory. Every
// format the recorder writes and replay, tune and inspect read is defined
// here, once; readers validate strictly and report the file and field or byte
// offset of any problem.
package db

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/internal/jsonfield"
	"github.com/mneme-gpu/mneme/internal/safefile"
	"github.com/zeebo/xxh3"
)

// FormatVersion is the version of the kernel JSON and snapshot layouts this
// package writes; readers refuse other versions rather than misread them.
const FormatVersion = 1

// Kernel is one <static-hash>.json file: a statically distinct kernel (its
// mangled name and IR) and every distinct launch of it that was recorded.
// JSON keys are Mneme's where Mneme has the field.
type Kernel struct {
	StaticHash      string   `json:"StaticHash"`
	VAddr           string   `json:"VAddr"` // base of the recording arena, "0x..." hex
	VASize          uint64   `json:"VASize"`
	KernelName      string   `json:"KernelName"` // mangled
	DemangledName   string   `json:"DemangledName"`
	Modules         []string `json:"Modules"` // ["RecordedIR_<sh>.bc"], relative to the database directory
	ArgNames        []string `json:"ArgNames"`
	Specializations []bool   `json:"Specializations"` // per argument: scalar, so it can be folded into the code
	// DeviceCode is the fat binary the application registered for the
	// kernel ("DeviceCode_<hash>.fatbin"): the code the application really
	// ran, which `replay --original` and tuning baselines run. Empty in
	// recordings made before it was kept.
	DeviceCode string `json:"DeviceCode,omitempty"`
	// Code says what the kernel's code is recorded as: CodeIR (or empty,
	// as in recordings made before the field existed) for LLVM IR in
	// Modules, CodeMachine for only the machine code the application
	// loaded (DeviceCode; an application not built with mneme's compiler
	// wrapper, recorded through the driver), Modules then being empty.
	Code string `json:"Code,omitempty"`
	// CompileFlags are the options of the application's compile that shape
	// device code beyond what the IR shows (-O level, ptxas options), as the
	// compiler wrapper saw them; replay's baseline honours them.
	CompileFlags []string `json:"CompileFlags,omitempty"`
	// Rank is the MPI rank of the process that recorded the kernel, when
	// `mneme record` ran inside an MPI job.
	Rank *int `json:"Rank,omitempty"`

	// Ours: what replay and inspect need beyond Mneme's keys.
	ArgSizes      []uint64             `json:"ArgSizes"`
	ArgKinds      []mneme.ArgKind      `json:"ArgKinds"`
	Device        DeviceInfo           `json:"Device"`
	Toolchain     Toolchain            `json:"Toolchain"`
	FormatVersion int                  `json:"FormatVersion"`
	Instances     map[string]*Instance `json:"instances"`
}

// DeviceInfo is the GPU a kernel was recorded on, so a replay elsewhere can say so.
type DeviceInfo struct {
	Name              string `json:"Name"`
	ComputeCapability string `json:"ComputeCapability"` // "9.0"
	Arch              string `json:"Arch"`              // "sm_90"
	SMCount           int    `json:"SMCount"`
	TotalMem          uint64 `json:"TotalMem"`
	DriverVersion     int    `json:"DriverVersion"` // as cuDriverGetVersion: 13000 for 13.0
}

// Toolchain names the versions that produced the recording.
type Toolchain struct {
	Mneme string `json:"Mneme"`
	LLVM  string `json:"LLVM"`
	Clang string `json:"Clang"`
	CUDA  string `json:"CUDA"`
}

// Instance is one distinct launch (geometry, shared memory and argument
// values) of a kernel, with the snapshots taken before and after it.
type Instance struct {
	DynamicHash string     `json:"DynamicHash"`
	Prologue    string     `json:"Prologue"` // snapshot file name, relative to the database directory
	Epilogue    string     `json:"Epilogue"`
	BlockDims   mneme.Dim3 `json:"BlockDims"`
	GridDims    mneme.Dim3 `json:"GridDims"`
	SharedMem   uint32     `json:"SharedMem"`
	Args        []string   `json:"Args"` // each argument's bytes as lowercase hex
	Occurrences int        `json:"Occurrences"`
	// Sizes of the snapshot files as written, for inspect without opening them.
	PrologueBytes uint64 `json:"PrologueBytes"`
	EpilogueBytes uint64 `json:"EpilogueBytes"`
	RecordedAt    string `json:"RecordedAt"` // RFC 3339
}

// What a kernel's code is recorded as (Kernel.Code).
const (
	CodeIR      = "ir"
	CodeMachine = "machine"
)

// MachineCodeOnly reports whether the kernel has no IR: replay runs its
// recorded machine code, and nothing is recompiled from IR.
func (k *Kernel) MachineCodeOnly() bool { return k.Code == CodeMachine }

// InstanceIDs lists the kernel's dynamic hashes in sorted order.
func (k *Kernel) InstanceIDs() []string {
	ids := make([]string, 0, len(k.Instances))
	for id := range k.Instances {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Name is the name to show a person: demangled when known.
func (k *Kernel) Name() string {
	if k.DemangledName != "" {
		return k.DemangledName
	}
	return k.KernelName
}

// File names inside a database directory.

// KernelFileName is the JSON file of the kernel with static hash sh.
func KernelFileName(sh string) string { return sh + ".json" }

// IRFileName is the recorded bitcode of the kernel with static hash sh.
func IRFileName(sh string) string { return "RecordedIR_" + sh + ".bc" }

// DeviceCodeFileName names a fat binary by its content, so kernels of one
// translation unit share one file.
func DeviceCodeFileName(image []byte) string {
	return fmt.Sprintf("DeviceCode_%016x.fatbin", xxh3.Hash(image))
}

// PrologueFileName is the snapshot taken before launch dh of kernel sh.
func PrologueFileName(sh, dh string) string {
	return "DeviceState.prologue." + sh + "." + dh + ".mneme"
}

// EpilogueFileName is the snapshot taken after launch dh of kernel sh.
func EpilogueFileName(sh, dh string) string {
	return "DeviceState.epilogue." + sh + "." + dh + ".mneme"
}

// DynamicHash identifies one launch of a kernel. Unlike Mneme's, which hashes
// only the dimensions and shared memory, it also covers every argument's
// bytes, so launches that differ only in a scalar are distinct instances.
func DynamicHash(grid, block mneme.Dim3, shared uint32, args [][]byte) string {
	n := 4*8 + 8
	for _, a := range args {
		n += 8 + len(a)
	}
	buf := make([]byte, 0, n)
	for _, v := range []uint32{grid.X, grid.Y, grid.Z, block.X, block.Y, block.Z, shared, uint32(len(args))} {
		buf = binary.LittleEndian.AppendUint32(buf, v)
	}
	for _, a := range args {
		// Length-prefixed so (ab, c) and (a, bc) hash differently.
		buf = binary.LittleEndian.AppendUint64(buf, uint64(len(a)))
		buf = append(buf, a...)
	}
	return fmt.Sprintf("%016x", xxh3.Hash(buf))
}

// StaticHash identifies a kernel by its mangled name and the IR it was built from.
func StaticHash(mangledName string, ir []byte) string {
	h := xxh3.New()
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(mangledName)))
	h.Write(n[:])
	h.WriteString(mangledName)
	h.Write(ir)
	return fmt.Sprintf("%016x", h.Sum64())
}

// ParseVAddr reads the arena base address of the kernel.
func (k *Kernel) ParseVAddr() (uint64, error) {
	s, ok := strings.CutPrefix(k.VAddr, "0x")
	if !ok {
		s, ok = strings.CutPrefix(k.VAddr, "0X")
	}
	if !ok || s == "" {
		return 0, fmt.Errorf("VAddr %q: want a 0x-prefixed hex address", k.VAddr)
	}
	v, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("VAddr %q: want a 0x-prefixed hex address", k.VAddr)
	}
	return v, nil
}

// FormatVAddr writes an address the way VAddr holds it.
func FormatVAddr(addr uint64) string { return fmt.Sprintf("0x%x", addr) }

// ArgBytes decodes the instance's argument bytes.
func (inst *Instance) ArgBytes() ([][]byte, error) {
	out := make([][]byte, len(inst.Args))
	for i, a := range inst.Args {
		b, err := hex.DecodeString(a)
		if err != nil {
			return nil, fieldErr(fmt.Sprintf("Args[%d]", i), "%q is not hex", a)
		}
		out[i] = b
	}
	return out, nil
}

// EncodeArgs turns argument bytes into Instance.Args.
func EncodeArgs(args [][]byte) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = hex.EncodeToString(a)
	}
	return out
}

// fieldError names the field of a kernel file that is wrong.
type fieldError struct {
	field string
	msg   string
}

func (e *fieldError) Error() string { return e.field + ": " + e.msg }

func fieldErr(field, format string, a ...any) error {
	return &fieldError{field: field, msg: fmt.Sprintf(format, a...)}
}

// isPlainFileName accepts a bare file name that stays inside the database
// directory when joined to it (no separators, no "..", no hidden temp files).
func isPlainFileName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, `/\`+"\x00") && !strings.HasPrefix(name, ".")
}

// isHashLike accepts the characters our hashes and ids use, so they can be
// embedded in file names safely.
func isHashLike(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Validate checks everything a reader relies on; WriteKernel refuses a kernel
// that fails it, and ReadKernel reports the failure with the file name.
func (k *Kernel) Validate() error {
	if k.FormatVersion != FormatVersion {
		return fieldErr("FormatVersion", "%d is not supported (this mneme reads version %d)", k.FormatVersion, FormatVersion)
	}
	if !isHashLike(k.StaticHash) {
		return fieldErr("StaticHash", "%q: want a non-empty hash of letters, digits, '_' or '-'", k.StaticHash)
	}
	if _, err := k.ParseVAddr(); err != nil {
		return fieldErr("VAddr", "%q is not a 0x-prefixed hex address", k.VAddr)
	}
	if k.KernelName == "" {
		return fieldErr("KernelName", "empty")
	}
	switch k.Code {
	case "", CodeIR:
		if len(k.Modules) == 0 {
			return fieldErr("Modules", "empty: the recorded IR file is needed for replay")
		}
	case CodeMachine:
		if k.DeviceCode == "" {
			return fieldErr("DeviceCode", "empty, but Code %q says the kernel's machine code is all that was recorded", k.Code)
		}
		if len(k.Modules) != 0 {
			return fieldErr("Modules", "%d entries, but Code %q says the kernel has no IR", len(k.Modules), k.Code)
		}
	default:
		return fieldErr("Code", "%q: want %q or %q", k.Code, CodeIR, CodeMachine)
	}
	for i, m := range k.Modules {
		if !isPlainFileName(m) {
			return fieldErr(fmt.Sprintf("Modules[%d]", i), "%q: want a file name inside the database directory", m)
		}
	}
	if k.DeviceCode != "" && !isPlainFileName(k.DeviceCode) {
		return fieldErr("DeviceCode", "%q: want a file name inside the database directory", k.DeviceCode)
	}
	n := len(k.ArgSizes)
	if len(k.ArgNames) != n {
		return fieldErr("ArgNames", "%d entries, but ArgSizes has %d", len(k.ArgNames), n)
	}
	if len(k.Specializations) != n {
		return fieldErr("Specializations", "%d entries, but ArgSizes has %d", len(k.Specializations), n)
	}
	if len(k.ArgKinds) != n {
		return fieldErr("ArgKinds", "%d entries, but ArgSizes has %d", len(k.ArgKinds), n)
	}
	for i, kind := range k.ArgKinds {
		parsed, err := mneme.ParseArgKind(string(kind))
		size := parsed.Size()
		if err != nil {
			return fieldErr(fmt.Sprintf("ArgKinds[%d]", i), "%v", err)
		}
		if size != k.ArgSizes[i] {
			return fieldErr(fmt.Sprintf("ArgSizes[%d]", i), "%d bytes, but ArgKinds[%d] %q is %d bytes", k.ArgSizes[i], i, kind, size)
		}
	}
	if k.Device.Arch != "" && !validArch(k.Device.Arch) {
		return fieldErr("Device.Arch", "%q: want sm_NN", k.Device.Arch)
	}
	for _, id := range k.InstanceIDs() {
		inst := k.Instances[id]
		where := fmt.Sprintf("instances[%s]", id)
		if inst == nil {
			return fieldErr(where, "null")
		}
		if err := k.validateInstance(id, inst); err != nil {
			var fe *fieldError
			if errors.As(err, &fe) {
				return fieldErr(where+"."+fe.field, "%s", fe.msg)
			}
			return fieldErr(where, "%v", err)
		}
	}
	return nil
}

func validArch(a string) bool {
	rest, ok := strings.CutPrefix(a, "sm_")
	if !ok || rest == "" {
		return false
	}
	rest = strings.TrimSuffix(strings.TrimSuffix(rest, "a"), "f")
	_, err := strconv.ParseUint(rest, 10, 16)
	return err == nil
}

func (k *Kernel) validateInstance(id string, inst *Instance) error {
	if !isHashLike(id) {
		return fieldErr("DynamicHash", "%q: want a hash of letters, digits, '_' or '-'", id)
	}
	if inst.DynamicHash != id {
		return fieldErr("DynamicHash", "%q differs from its key %q", inst.DynamicHash, id)
	}
	for _, f := range []struct {
		name string
		d    mneme.Dim3
	}{{"GridDims", inst.GridDims}, {"BlockDims", inst.BlockDims}} {
		if f.d.X == 0 || f.d.Y == 0 || f.d.Z == 0 {
			return fieldErr(f.name, "%s: every component must be at least 1", f.d)
		}
	}
	if inst.BlockDims.Count() > 1024 {
		return fieldErr("BlockDims", "%s: %d threads exceed the CUDA limit of 1024", inst.BlockDims, inst.BlockDims.Count())
	}
	if !isPlainFileName(inst.Prologue) {
		return fieldErr("Prologue", "%q: want a snapshot file name inside the database directory", inst.Prologue)
	}
	if !isPlainFileName(inst.Epilogue) {
		return fieldErr("Epilogue", "%q: want a snapshot file name inside the database directory", inst.Epilogue)
	}
	if len(inst.Args) != len(k.ArgSizes) {
		return fieldErr("Args", "%d arguments, but the kernel has %d (ArgSizes)", len(inst.Args), len(k.ArgSizes))
	}
	args, err := inst.ArgBytes()
	if err != nil {
		return err
	}
	for i, b := range args {
		if uint64(len(b)) != k.ArgSizes[i] {
			return fieldErr(fmt.Sprintf("Args[%d]", i), "%d bytes, but ArgSizes[%d] is %d", len(b), i, k.ArgSizes[i])
		}
	}
	if inst.Occurrences < 1 {
		return fieldErr("Occurrences", "%d: a recorded instance occurred at least once", inst.Occurrences)
	}
	if inst.RecordedAt != "" {
		if _, err := time.Parse(time.RFC3339Nano, inst.RecordedAt); err != nil {
			return fieldErr("RecordedAt", "%q is not an RFC 3339 time", inst.RecordedAt)
		}
	}
	if want := DynamicHash(inst.GridDims, inst.BlockDims, inst.SharedMem, args); want != id {
		return fieldErr("DynamicHash", "%q does not match its dimensions, shared memory and arguments (they hash to %q)", id, want)
	}
	return nil
}

// requiredKernelKeys and requiredInstanceKeys must be present in a file; a
// missing key would otherwise silently read as zero.
var (
	requiredKernelKeys   = []string{"StaticHash", "VAddr", "VASize", "KernelName", "Modules", "ArgNames", "Specializations", "ArgSizes", "ArgKinds", "FormatVersion", "instances"}
	requiredInstanceKeys = []string{"DynamicHash", "Prologue", "Epilogue", "BlockDims", "GridDims", "SharedMem", "Args", "Occurrences"}
	requiredDimKeys      = []string{"x", "y", "z"}
)

// decodeObject checks a file's JSON (duplicate keys, nesting) and decodes
// its top level, which must be an object holding every required key.
func decodeObject(data []byte, required []string) (map[string]json.RawMessage, error) {
	if err := jsonfield.Check(data); err != nil {
		return nil, err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, jsonError(data, err)
	}
	if top == nil {
		return nil, errors.New("not a JSON object")
	}
	if err := requireKeys(top, required, ""); err != nil {
		return nil, err
	}
	return top, nil
}

// ParseKernel decodes and validates one kernel file's contents; name is the
// file name used in errors.
func ParseKernel(name string, data []byte) (*Kernel, error) {
	fail := func(err error) (*Kernel, error) { return nil, fmt.Errorf("%s: %w", name, err) }
	top, err := decodeObject(data, requiredKernelKeys)
	if err != nil {
		return fail(err)
	}
	var insts map[string]json.RawMessage
	if err := json.Unmarshal(top["instances"], &insts); err != nil {
		return fail(fieldErr("instances", "want an object keyed by dynamic hash: %v", err))
	}
	for id, raw := range insts {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
			return fail(fieldErr("instances["+id+"]", "want an object"))
		}
		if err := requireKeys(fields, requiredInstanceKeys, "instances["+id+"]."); err != nil {
			return fail(err)
		}
		for _, dim := range []string{"BlockDims", "GridDims"} {
			var d map[string]json.RawMessage
			if err := json.Unmarshal(fields[dim], &d); err != nil || d == nil {
				return fail(fieldErr("instances["+id+"]."+dim, "want an object {x, y, z}"))
			}
			if err := requireKeys(d, requiredDimKeys, "instances["+id+"]."+dim+"."); err != nil {
				return fail(err)
			}
		}
	}
	var k Kernel
	if err := json.Unmarshal(data, &k); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fail(fieldErr(te.Field, "JSON %s cannot be read as %s", te.Value, te.Type))
		}
		return fail(jsonError(data, err))
	}
	if err := k.Validate(); err != nil {
		return fail(err)
	}
	return &k, nil
}

func requireKeys(obj map[string]json.RawMessage, keys []string, prefix string) error {
	for _, key := range keys {
		v, ok := obj[key]
		if !ok {
			return fieldErr(prefix+key, "missing")
		}
		if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			return fieldErr(prefix+key, "null")
		}
	}
	return nil
}

// jsonError adds the line and column to a syntax error.
func jsonError(data []byte, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) && se.Offset <= int64(len(data)) {
		before := data[:se.Offset]
		line := bytes.Count(before, []byte("\n")) + 1
		col := int(se.Offset) - bytes.LastIndexByte(before, '\n')
		return fmt.Errorf("invalid JSON at line %d, column %d: %v", line, col-1, err)
	}
	return fmt.Errorf("invalid JSON: %v", err)
}

// ReadKernel reads and validates one <static-hash>.json file (a regular
// file of at most safefile.MaxJSON bytes).
func ReadKernel(path string) (*Kernel, error) {
	data, err := safefile.ReadFile(path, safefile.MaxJSON)
	if err != nil {
		return nil, err
	}
	return ParseKernel(path, data)
}

// readKernelIn reads the kernel file name of the database directory dir,
// refusing a link that leads out of it.
func readKernelIn(dir, name string) (*Kernel, error) {
	data, err := safefile.ReadFileIn(dir, name, safefile.MaxJSON)
	if err != nil {
		return nil, err
	}
	return ParseKernel(filepath.Join(dir, name), data)
}

// MarshalKernel is the exact bytes WriteKernel stores.
func MarshalKernel(k *Kernel) ([]byte, error) {
	if err := k.Validate(); err != nil {
		return nil, fmt.Errorf("kernel %s: %w", k.KernelName, err)
	}
	data, err := json.MarshalIndent(withEmptySlices(k), "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// withEmptySlices returns a copy whose nil lists are empty, because a reader
// rejects null for a required key.
func withEmptySlices(k *Kernel) *Kernel {
	c := *k
	if c.Modules == nil {
		c.Modules = []string{}
	}
	if c.ArgNames == nil {
		c.ArgNames = []string{}
	}
	if c.Specializations == nil {
		c.Specializations = []bool{}
	}
	if c.ArgSizes == nil {
		c.ArgSizes = []uint64{}
	}
	if c.ArgKinds == nil {
		c.ArgKinds = []mneme.ArgKind{}
	}
	c.Instances = make(map[string]*Instance, len(k.Instances))
	for id, inst := range k.Instances {
		ic := *inst
		if ic.Args == nil {
			ic.Args = []string{}
		}
		c.Instances[id] = &ic
	}
	return &c
}

// WriteKernel validates k and replaces dir/<StaticHash>.json atomically, so
// a reader (or a crash of the recording application) never sees a partial file.
func WriteKernel(dir string, k *Kernel) error {
	data, err := MarshalKernel(k)
	if err != nil {
		return err
	}
	return WriteFileAtomic(filepath.Join(dir, KernelFileName(k.StaticHash)), data)
}
