package tune

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
)

// updatePython rewrites the files the Python tests read from the Go tables
// and writers: go test ./tune -run Python -update-python.
var updatePython = flag.Bool("update-python", false, "rewrite python/tests/testdata/rdb and python/mneme/vocabulary.json")

const pythonRecording = "../python/tests/testdata/rdb"

// writePythonRecording writes the recording the Python tests read, with the
// database's own writers: a vector add with two instances (grid 4096 and 8,
// block 256) whose last argument, n, is a scalar.
func writePythonRecording(dir string) error {
	const arena = 0x531540000000
	u64 := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	u32 := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
	k := &db.Kernel{KernelName: "_Z6vecaddPKfS0_Pfi", DemangledName: "vecadd(float const*, float const*, float*, int)",
		ArgNames: []string{"a", "b", "c", "n"}, Specializations: []bool{false, false, false, true},
		ArgSizes: []uint64{8, 8, 8, 4}, ArgKinds: []mneme.ArgKind{"ptr", "ptr", "ptr", "i32"}}
	ir := []byte("placeholder bitcode of the vector add")
	k.StaticHash = db.StaticHash(k.KernelName, ir)
	k.VAddr, k.VASize = db.FormatVAddr(arena), 4<<30
	k.Modules = []string{db.IRFileName(k.StaticHash)}
	k.Device = db.DeviceInfo{Name: "NVIDIA H100", ComputeCapability: "9.0", Arch: "sm_90", SMCount: 132, TotalMem: 80 << 30, DriverVersion: 13000}
	k.Toolchain = db.Toolchain{Mneme: "0.1.0-test", LLVM: "22.1.0", Clang: "22.1.0", CUDA: "13.0"}
	k.FormatVersion = db.FormatVersion
	k.Instances = map[string]*db.Instance{}
	if err := db.WriteFileAtomic(filepath.Join(dir, k.Modules[0]), ir); err != nil {
		return err
	}
	for i, l := range []struct{ grid, n uint32 }{{4096, 0x1000}, {8, 0x800}} {
		args := [][]byte{u64(arena), u64(arena + 0x400000), u64(arena + 0x800000), u32(l.n)}
		grid, block := mneme.Dim3{X: l.grid, Y: 1, Z: 1}, mneme.Dim3{X: 256, Y: 1, Z: 1}
		dh := db.DynamicHash(grid, block, 0, args)
		inst := &db.Instance{DynamicHash: dh, Prologue: db.PrologueFileName(k.StaticHash, dh), Epilogue: db.EpilogueFileName(k.StaticHash, dh),
			GridDims: grid, BlockDims: block, Args: db.EncodeArgs(args), Occurrences: 3, RecordedAt: "2026-03-01T12:00:00Z"}
		data := make([]byte, 4096)
		for j := range data {
			data[j] = byte(j * (i + 1))
		}
		opts := db.SnapshotOptions{Compress: true, NoSync: true}
		n, err := db.WriteSnapshot(filepath.Join(dir, inst.Prologue), &db.Snapshot{Blobs: []db.Blob{{Addr: arena, Size: 4096, Data: data}}, Args: args}, opts)
		if err != nil {
			return err
		}
		inst.PrologueBytes = uint64(n)
		epi := append([]byte{1}, data[1:]...)
		if n, err = db.WriteSnapshot(filepath.Join(dir, inst.Epilogue), &db.Snapshot{Blobs: []db.Blob{{Addr: arena, Size: 4096, Data: epi}}, Args: args}, opts); err != nil {
			return err
		}
		inst.EpilogueBytes = uint64(n)
		k.Instances[dh] = inst
	}
	return db.WriteKernel(dir, k)
}

// TestPythonRecordingIsCurrent checks that the recording the Python tests
// read is what the Go writers write today, so the Python readers are
// tested against the real format, not a hand-written one.
func TestPythonRecordingIsCurrent(t *testing.T) {
	if *updatePython {
		os.RemoveAll(pythonRecording)
		if err := os.MkdirAll(pythonRecording, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := writePythonRecording(pythonRecording); err != nil {
			t.Fatal(err)
		}
	}
	fresh := t.TempDir()
	if err := writePythonRecording(fresh); err != nil {
		t.Fatal(err)
	}
	names := func(dir string) []string {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatalf("%v (regenerate with go test ./tune -run Python -update-python)", err)
		}
		var out []string
		for _, e := range entries {
			out = append(out, e.Name())
		}
		return out
	}
	want, got := names(fresh), names(pythonRecording)
	if !slices.Equal(want, got) {
		t.Fatalf("%s holds %v, the writers write %v (regenerate with go test ./tune -run Python -update-python)", pythonRecording, got, want)
	}
	for _, n := range want {
		a, _ := os.ReadFile(filepath.Join(fresh, n))
		b, _ := os.ReadFile(filepath.Join(pythonRecording, n))
		if !bytes.Equal(a, b) {
			t.Errorf("%s/%s differs from what the writers write (regenerate with go test ./tune -run Python -update-python)", pythonRecording, n)
		}
	}
}

const pythonVocabulary = "../python/mneme/vocabulary.json"

// TestPythonVocabularyIsCurrent checks that the vocabulary the Python
// package reads is the Go tables' (keys, statuses, presets, ...).
func TestPythonVocabularyIsCurrent(t *testing.T) {
	want, err := json.MarshalIndent(TheVocabulary(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, '\n')
	if *updatePython {
		if err := os.WriteFile(pythonVocabulary, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(pythonVocabulary)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%s is not the Go tables' vocabulary (%v): regenerate with go test ./tune -run Python -update-python", pythonVocabulary, err)
	}
}

// TestSummaryHasMnemeKeys checks that summary.json carries every key of
// Mneme's summary.
func TestSummaryHasMnemeKeys(t *testing.T) {
	b, err := json.Marshal(Summary{})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range MnemeSummaryKeys {
		if _, ok := m[k]; !ok {
			t.Errorf("summary.json lacks Mneme's key %q", k)
		}
	}
}
