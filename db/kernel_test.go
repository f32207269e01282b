package db

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme"
)

// sampleKernel builds a valid kernel with one instance per scalar value of n.
func sampleKernel(t testing.TB, name string, ns ...int32) *Kernel {
	t.Helper()
	sh := StaticHash(name, []byte("bitcode of "+name))
	k := &Kernel{
		StaticHash: sh, VAddr: FormatVAddr(0x153940000000), VASize: 4 << 30,
		KernelName: name, DemangledName: "demangled " + name,
		Modules:         []string{IRFileName(sh)},
		ArgNames:        []string{"x", "n", "a"},
		Specializations: []bool{false, true, true},
		ArgSizes:        []uint64{8, 4, 4},
		ArgKinds:        []mneme.ArgKind{"ptr", "i32", "f32"},
		Device:          DeviceInfo{Name: "NVIDIA H200", ComputeCapability: "9.0", Arch: "sm_90", SMCount: 132, TotalMem: 141 << 30, DriverVersion: 13000},
		Toolchain:       Toolchain{Mneme: "test", LLVM: "22.1.0", Clang: "22.1.0", CUDA: "13.0"},
		FormatVersion:   FormatVersion,
		Instances:       map[string]*Instance{},
	}
	for _, n := range ns {
		args := [][]byte{
			binary.LittleEndian.AppendUint64(nil, 0x153940000000),
			binary.LittleEndian.AppendUint32(nil, uint32(n)),
			binary.LittleEndian.AppendUint32(nil, math.Float32bits(2.5)),
		}
		grid, block := mneme.Dim3{X: uint32(n+255) / 256, Y: 1, Z: 1}, mneme.Dim3{X: 256, Y: 1, Z: 1}
		dh := DynamicHash(grid, block, 0, args)
		k.Instances[dh] = &Instance{
			DynamicHash: dh, Prologue: PrologueFileName(sh, dh), Epilogue: EpilogueFileName(sh, dh),
			GridDims: grid, BlockDims: block, Args: EncodeArgs(args), Occurrences: 1,
			RecordedAt: "2026-01-02T03:04:05Z",
		}
	}
	return k
}

func TestKernelRoundTrip(t *testing.T) {
	dir := t.TempDir()
	k := sampleKernel(t, "_Z6vecaddPfif", 1000, 2000)
	if err := WriteKernel(dir, k); err != nil {
		t.Fatal(err)
	}
	got, err := ReadKernel(filepath.Join(dir, KernelFileName(k.StaticHash)))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(k)
	b, _ := json.Marshal(got)
	if string(a) != string(b) {
		t.Fatalf("round trip changed the kernel:\n%s\n%s", a, b)
	}
	if ids := got.InstanceIDs(); len(ids) != 2 || ids[0] > ids[1] {
		t.Fatalf("InstanceIDs = %v, want 2 sorted ids", ids)
	}
	// Mneme's keys are present under Mneme's names.
	var raw map[string]any
	data, _ := os.ReadFile(filepath.Join(dir, KernelFileName(k.StaticHash)))
	json.Unmarshal(data, &raw)
	for _, key := range []string{"StaticHash", "VAddr", "VASize", "KernelName", "DemangledName", "Modules", "ArgNames", "Specializations", "instances"} {
		if _, ok := raw[key]; !ok {
			t.Errorf("key %s missing from the written file", key)
		}
	}
	inst := raw["instances"].(map[string]any)[k.InstanceIDs()[0]].(map[string]any)
	for _, key := range []string{"Prologue", "Epilogue", "BlockDims", "GridDims", "SharedMem", "Args", "Occurrences"} {
		if _, ok := inst[key]; !ok {
			t.Errorf("instance key %s missing from the written file", key)
		}
	}
	if bd := inst["BlockDims"].(map[string]any); bd["x"] != 256.0 {
		t.Errorf("BlockDims = %v, want {x:256,...}", bd)
	}
	// No temporary files are left behind.
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries after one write, want 1", len(entries))
	}
}

func TestKernelWithoutArgsRoundTrips(t *testing.T) {
	dir := t.TempDir()
	sh := StaticHash("_Z4noopv", nil)
	grid := mneme.Dim3{X: 1, Y: 1, Z: 1}
	dh := DynamicHash(grid, grid, 0, nil)
	k := &Kernel{StaticHash: sh, VAddr: "0x0", KernelName: "_Z4noopv", Modules: []string{IRFileName(sh)}, FormatVersion: FormatVersion,
		Instances: map[string]*Instance{dh: {DynamicHash: dh, Prologue: "p", Epilogue: "e", GridDims: grid, BlockDims: grid, Occurrences: 3}}}
	if err := WriteKernel(dir, k); err != nil {
		t.Fatal(err)
	}
	got, err := ReadKernel(filepath.Join(dir, sh+".json"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Instances[dh].Occurrences != 3 || len(got.ArgSizes) != 0 {
		t.Fatalf("read back %+v", got.Instances[dh])
	}
}

func TestDynamicHashCoversArguments(t *testing.T) {
	g, b := mneme.Dim3{X: 4, Y: 1, Z: 1}, mneme.Dim3{X: 256, Y: 1, Z: 1}
	base := DynamicHash(g, b, 0, [][]byte{{1, 0, 0, 0}})
	for name, other := range map[string]string{
		"scalar":  DynamicHash(g, b, 0, [][]byte{{2, 0, 0, 0}}),
		"grid":    DynamicHash(mneme.Dim3{X: 5, Y: 1, Z: 1}, b, 0, [][]byte{{1, 0, 0, 0}}),
		"block":   DynamicHash(g, mneme.Dim3{X: 128, Y: 2, Z: 1}, 0, [][]byte{{1, 0, 0, 0}}),
		"shared":  DynamicHash(g, b, 16, [][]byte{{1, 0, 0, 0}}),
		"split":   DynamicHash(g, b, 0, [][]byte{{1, 0}, {0, 0}}),
		"no args": DynamicHash(g, b, 0, nil),
	} {
		if other == base {
			t.Errorf("changing the %s does not change the dynamic hash", name)
		}
	}
	if again := DynamicHash(g, b, 0, [][]byte{{1, 0, 0, 0}}); again != base || len(base) != 16 {
		t.Errorf("hash not stable or not 16 hex digits: %q %q", base, again)
	}
	if StaticHash("a", []byte("bc")) == StaticHash("ab", []byte("c")) {
		t.Error("StaticHash confuses name and IR boundaries")
	}
}

// TestReadKernelRejects checks that each kind of damage is reported with the
// file and the field.
func TestReadKernelRejects(t *testing.T) {
	k := sampleKernel(t, "_Z1kPfif", 7)
	id := k.InstanceIDs()[0]
	good, err := MarshalKernel(k)
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(m map[string]any, inst map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(good, &m); err != nil {
			t.Fatal(err)
		}
		f(m, m["instances"].(map[string]any)[id].(map[string]any))
		out, _ := json.Marshal(m)
		return out
	}
	cases := []struct {
		name, want string
		data       []byte
	}{
		{"syntax", "invalid JSON at line", []byte("{\n  \"StaticHash\": ,\n}")},
		{"not object", "invalid JSON", []byte("[1,2]")},
		{"missing key", "KernelName: missing", edit(func(m, _ map[string]any) { delete(m, "KernelName") })},
		{"null key", "Modules: null", edit(func(m, _ map[string]any) { m["Modules"] = nil })},
		{"bad vaddr", "VAddr: \"0xZZ\" is not a 0x-prefixed hex address", edit(func(m, _ map[string]any) { m["VAddr"] = "0xZZ" })},
		{"vaddr no prefix", "VAddr", edit(func(m, _ map[string]any) { m["VAddr"] = "1234" })},
		{"wrong type", "VASize: JSON string cannot be read as uint64", edit(func(m, _ map[string]any) { m["VASize"] = "big" })},
		{"version", "FormatVersion: 9 is not supported", edit(func(m, _ map[string]any) { m["FormatVersion"] = 9 })},
		{"path in module", "Modules[0]", edit(func(m, _ map[string]any) { m["Modules"] = []string{"../etc/passwd"} })},
		{"arg names", "ArgNames: 2 entries, but ArgSizes has 3", edit(func(m, _ map[string]any) { m["ArgNames"] = []string{"a", "b"} })},
		{"arg kind", "ArgKinds[1]: unknown argument kind \"int\"", edit(func(m, _ map[string]any) { m["ArgKinds"] = []string{"ptr", "int", "f32"} })},
		{"kind size", "ArgSizes[2]: 4 bytes, but ArgKinds[2] \"f64\" is 8 bytes", edit(func(m, _ map[string]any) { m["ArgKinds"] = []string{"ptr", "i32", "f64"} })},
		{"arch", "Device.Arch", edit(func(m, _ map[string]any) { m["Device"].(map[string]any)["Arch"] = "hopper" })},
		{"missing prologue", "instances[" + id + "].Prologue: missing", edit(func(_, i map[string]any) { delete(i, "Prologue") })},
		{"empty epilogue", "instances[" + id + "].Epilogue", edit(func(_, i map[string]any) { i["Epilogue"] = "" })},
		{"args count", "instances[" + id + "].Args: 2 arguments, but the kernel has 3", edit(func(_, i map[string]any) { i["Args"] = []string{"00", "00"} })},
		{"args hex", "instances[" + id + "].Args[1]: \"zz\" is not hex", edit(func(_, i map[string]any) { i["Args"].([]any)[1] = "zz" })},
		{"args size", "instances[" + id + "].Args[1]: 2 bytes, but ArgSizes[1] is 4", edit(func(_, i map[string]any) { i["Args"].([]any)[1] = "0000" })},
		{"zero dim", "instances[" + id + "].BlockDims: 0,1,1", edit(func(_, i map[string]any) { i["BlockDims"].(map[string]any)["x"] = 0 })},
		{"missing dim", "instances[" + id + "].GridDims.z: missing", edit(func(_, i map[string]any) { delete(i["GridDims"].(map[string]any), "z") })},
		{"occurrences", "instances[" + id + "].Occurrences", edit(func(_, i map[string]any) { i["Occurrences"] = 0 })},
		{"hash mismatch", "instances[" + id + "].DynamicHash: \"" + id + "\" does not match", edit(func(_, i map[string]any) { i["SharedMem"] = 64 })},
		{"key mismatch", "differs from its key", edit(func(_, i map[string]any) { i["DynamicHash"] = "abc" })},
		{"recorded at", "RecordedAt", edit(func(_, i map[string]any) { i["RecordedAt"] = "yesterday" })},
	}
	dir := t.TempDir()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".json")
			os.WriteFile(path, c.data, 0o644)
			_, err := ReadKernel(path)
			if err == nil {
				t.Fatalf("accepted: %s", c.data)
			}
			if !strings.HasPrefix(err.Error(), path+": ") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q: want the file name and %q", err, c.want)
			}
		})
	}
}

func TestWriteKernelRefusesInvalid(t *testing.T) {
	dir := t.TempDir()
	k := sampleKernel(t, "_Z1kPfif", 7)
	k.VAddr = "nowhere"
	if err := WriteKernel(dir, k); err == nil || !strings.Contains(err.Error(), "VAddr") {
		t.Fatalf("WriteKernel of a bad VAddr: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("a refused write left %d files", len(entries))
	}
}

func TestOpenAndFind(t *testing.T) {
	dir := t.TempDir()
	a := sampleKernel(t, "_Z1aPfif", 10, 20, 30)
	b := sampleKernel(t, "_Z1bPfif", 10)
	for _, k := range []*Kernel{b, a} {
		if err := WriteKernel(dir, k); err != nil {
			t.Fatal(err)
		}
	}
	d, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Kernels) != 2 || d.Kernels[0].KernelName != "_Z1aPfif" || d.NumInstances() != 4 {
		t.Fatalf("Open: %d kernels, first %q, %d instances", len(d.Kernels), d.Kernels[0].KernelName, d.NumInstances())
	}
	var id string // an instance of a that b does not share
	for _, cand := range a.InstanceIDs() {
		if b.Instances[cand] == nil {
			id = cand
		}
	}
	for _, q := range []string{id, id[:10], a.StaticHash + "/" + id, a.StaticHash[:4] + "/" + id[:6]} {
		k, inst, err := d.Find(q)
		if err != nil {
			t.Fatalf("Find(%q): %v", q, err)
		}
		if k != d.Kernels[0] || inst.DynamicHash != id {
			t.Fatalf("Find(%q) = %s/%s", q, k.StaticHash, inst.DynamicHash)
		}
	}
	// Both kernels have an instance with n=10 and the same dims and args: same dynamic hash.
	shared := b.InstanceIDs()[0]
	if _, _, err := d.Find(shared); !errors.Is(err, ErrAmbiguousInstance) || !strings.Contains(err.Error(), "<static-hash>/<dynamic-hash>") {
		t.Fatalf("Find of a hash two kernels share: %v", err)
	}
	if k, _, err := d.Find(b.StaticHash + "/" + shared); err != nil || k.KernelName != "_Z1bPfif" {
		t.Fatalf("qualified Find: %v", err)
	}
	if _, _, err := d.Find("ffffffffffffffff"); !errors.Is(err, ErrNoInstance) {
		t.Fatalf("Find of an unknown id: %v", err)
	}
	if _, _, err := d.Find(""); !errors.Is(err, ErrAmbiguousInstance) {
		t.Fatalf("Find(\"\") with 4 instances: %v", err)
	}

	// One file opens alone, and its only instance is the default.
	one, err := Open(filepath.Join(dir, KernelFileName(b.StaticHash)))
	if err != nil {
		t.Fatal(err)
	}
	if _, inst, err := one.Find(""); err != nil || inst.DynamicHash != shared || one.Dir != dir {
		t.Fatalf("single-file Find(\"\"): %v (dir %q)", err, one.Dir)
	}
	args, err := one.ArgBytes(one.Kernels[0].Instances[shared])
	if err != nil || len(args) != 3 || binary.LittleEndian.Uint32(args[1]) != 10 {
		t.Fatalf("ArgBytes = %v, %v", args, err)
	}
}

func TestOpenRejects(t *testing.T) {
	empty := t.TempDir()
	// A folder of several ranks' recordings names them.
	multi := t.TempDir()
	for _, r := range []string{"rank-0", "rank-3"} {
		if err := os.MkdirAll(filepath.Join(multi, r), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(multi, r, "k.json"), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(multi, "rank-9"), 0o755) // no kernel files: not named
	if _, err := Open(multi); err == nil || !strings.Contains(err.Error(), filepath.Join(multi, "rank-0")+", "+filepath.Join(multi, "rank-3")) || strings.Contains(err.Error(), "rank-9") {
		t.Errorf("a folder of rank recordings: %v", err)
	}
	if _, err := Open(empty); err == nil || !strings.Contains(err.Error(), "no kernel files") || !strings.Contains(err.Error(), empty) {
		t.Fatalf("empty directory: %v", err)
	}
	if _, err := Open(filepath.Join(empty, "nope")); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("missing path: %v", err)
	}
	bad := t.TempDir()
	WriteKernel(bad, sampleKernel(t, "_Z1aPfif", 1))
	os.WriteFile(filepath.Join(bad, "broken.json"), []byte("{"), 0o644)
	if _, err := Open(bad); err == nil || !strings.Contains(err.Error(), "broken.json") {
		t.Fatalf("corrupt file in directory: %v", err)
	}
	// A kernel file copied under another name: a second kernel of the same
	// static hash, whose instances no id could select. Refused naming it;
	// the database without the copy opens.
	copied := t.TempDir()
	k := sampleKernel(t, "_Z1aPfif", 1)
	if err := WriteKernel(copied, k); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(copied, k.StaticHash+".json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(copied); err != nil {
		t.Fatalf("the database before the copy: %v", err)
	}
	os.WriteFile(filepath.Join(copied, "copy.json"), data, 0o644)
	var in *mneme.InputError
	if _, err := Open(copied); !errors.As(err, &in) || !strings.Contains(err.Error(), "copy.json: StaticHash \""+k.StaticHash+"\" is not the file's name") {
		t.Fatalf("a kernel file under another name: %v", err)
	}
}
