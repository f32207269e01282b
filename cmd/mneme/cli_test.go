package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
)

// TestMain lets testscript scripts run `mneme` in-process (the test binary
// re-executed under that name), plus helper commands scripts use to build
// their inputs.
func TestMain(m *testing.M) {
	if os.Getenv(envRunAsCLI) == "1" {
		os.Exit(run(os.Args[1:]))
	}
	testscript.Main(m, map[string]func(){
		"mneme":         func() { os.Exit(run(os.Args[1:])) },
		"mneme-testdb":  func() { os.Exit(writeTestDB(os.Args[1:])) },
		"mneme-irentry": func() { os.Exit(writeIREntry(os.Args[1:])) },
	})
}

// TestScripts runs the CLI scripts of every subcommand under testdata/script.
func TestScripts(t *testing.T) {
	files, _ := filepath.Glob("testdata/script/*.txtar")
	if len(files) == 0 {
		t.Fatal("no scripts in testdata/script")
	}
	testscript.Run(t, testscript.Params{Dir: "testdata/script"})
}

// TestInspectScripts runs the scripts of `mneme inspect`.
func TestInspectScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{Dir: "testdata/inspect"})
}

// writeTestDB writes a small recording database with the real writers:
// `mneme-testdb DIR` makes two kernels, one with two instances that differ
// only in a scalar, one with a 2D launch, shared memory and an aggregate
// argument; every snapshot is written, the IR files hold placeholder bytes.
func writeTestDB(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: mneme-testdb DIR")
		return 2
	}
	if err := buildTestDB(args[0]); err != nil {
		fmt.Fprintln(os.Stderr, "mneme-testdb:", err)
		return 1
	}
	return 0
}

const testArena = 0x153940000000

func buildTestDB(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	device := db.DeviceInfo{Name: "NVIDIA H200", ComputeCapability: "9.0", Arch: "sm_90", SMCount: 132, TotalMem: 150 << 30, DriverVersion: 13000}
	tools := db.Toolchain{Mneme: "0.1.0-test", LLVM: "22.1.0", Clang: "22.1.0", CUDA: "13.0"}
	u32 := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
	u64 := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

	type launch struct {
		grid, block mneme.Dim3
		shared      uint32
		args        [][]byte
		occurrences int
	}
	kernels := []struct {
		k        *db.Kernel
		launches []launch
	}{
		{
			k: &db.Kernel{KernelName: "_Z6vecaddPfPKfif", DemangledName: "vecadd(float*, float const*, int, float)",
				ArgNames: []string{"y", "x", "n", "a"}, Specializations: []bool{false, false, true, true},
				ArgSizes: []uint64{8, 8, 4, 4}, ArgKinds: []mneme.ArgKind{"ptr", "ptr", "i32", "f32"}},
			launches: []launch{
				{mneme.Dim3{X: 4, Y: 1, Z: 1}, mneme.Dim3{X: 256, Y: 1, Z: 1}, 0, [][]byte{u64(testArena), u64(testArena + 0x200000), u32(1000), u32(math.Float32bits(2.5))}, 3},
				{mneme.Dim3{X: 8, Y: 1, Z: 1}, mneme.Dim3{X: 256, Y: 1, Z: 1}, 0, [][]byte{u64(testArena), u64(testArena + 0x200000), u32(2000), u32(math.Float32bits(2.5))}, 1},
			},
		},
		{
			k: &db.Kernel{KernelName: "_Z7stencil6Paramsd", DemangledName: "stencil(Params, double)",
				ArgNames: []string{"p", "w"}, Specializations: []bool{false, true},
				ArgSizes: []uint64{24, 8}, ArgKinds: []mneme.ArgKind{"byval:24", "f64"}},
			launches: []launch{
				{mneme.Dim3{X: 128, Y: 128, Z: 1}, mneme.Dim3{X: 16, Y: 16, Z: 1}, 4096, [][]byte{append(append(u64(testArena), u64(testArena+0x400000)...), u64(2048)...), u64(math.Float64bits(-0.25))}, 1},
			},
		},
	}
	for _, kk := range kernels {
		k := kk.k
		ir := []byte("placeholder bitcode of " + k.KernelName)
		k.StaticHash = db.StaticHash(k.KernelName, ir)
		k.VAddr, k.VASize = db.FormatVAddr(testArena), 4<<30
		k.Modules = []string{db.IRFileName(k.StaticHash)}
		k.Device, k.Toolchain, k.FormatVersion = device, tools, db.FormatVersion
		k.Instances = map[string]*db.Instance{}
		if err := db.WriteFileAtomic(filepath.Join(dir, k.Modules[0]), ir); err != nil {
			return err
		}
		for i, l := range kk.launches {
			dh := db.DynamicHash(l.grid, l.block, l.shared, l.args)
			inst := &db.Instance{DynamicHash: dh, Prologue: db.PrologueFileName(k.StaticHash, dh), Epilogue: db.EpilogueFileName(k.StaticHash, dh),
				GridDims: l.grid, BlockDims: l.block, SharedMem: l.shared, Args: db.EncodeArgs(l.args), Occurrences: l.occurrences,
				RecordedAt: "2026-03-01T12:00:00Z"}
			data := make([]byte, 64<<10)
			for j := range data {
				data[j] = byte(j * (i + 1))
			}
			pro := &db.Snapshot{Blobs: []db.Blob{{Addr: testArena, Size: uint64(len(data)), Data: data}}, Args: l.args}
			n, err := db.WriteSnapshot(filepath.Join(dir, inst.Prologue), pro, db.SnapshotOptions{Compress: true})
			if err != nil {
				return err
			}
			inst.PrologueBytes = uint64(n)
			epi := &db.Snapshot{Blobs: []db.Blob{{Addr: testArena, Size: uint64(len(data)), Data: append([]byte{1}, data[1:]...)}}, Args: l.args}
			if n, err = db.WriteSnapshot(filepath.Join(dir, inst.Epilogue), epi, db.SnapshotOptions{Compress: true}); err != nil {
				return err
			}
			inst.EpilogueBytes = uint64(n)
			k.Instances[dh] = inst
		}
		if err := db.WriteKernel(dir, k); err != nil {
			return err
		}
	}
	return writeTestStats(dir, kernels[0].k.StaticHash, kernels[1].k.StaticHash)
}

// writeTestStats writes the launch statistics of the test database's run:
// vecadd at a third size it did not record, with n changing and the
// rest invariant; stencil once; and init, which was not recorded at all.
func writeTestStats(dir, vecadd, stencil string) error {
	d1 := func(x uint32) mneme.Dim3 { return mneme.Dim3{X: x, Y: 1, Z: 1} }
	hexOf := func(b []byte) string { return fmt.Sprintf("%x", b) }
	u32 := func(v uint32) string { return hexOf(binary.LittleEndian.AppendUint32(nil, v)) }
	u64 := func(v uint64) string { return hexOf(binary.LittleEndian.AppendUint64(nil, v)) }
	s := &db.LaunchStats{
		FormatVersion: db.LaunchStatsVersion, Complete: true, WrittenAt: "2026-03-01T12:00:05Z",
		Limits: db.StatsLimits{MaxShapes: 32, MaxArgValues: 16, MaxArgBytes: 8, TimedFirst: 4, TimedEvery: 64},
		Kernels: []db.KernelStats{
			{KernelName: "_Z6vecaddPfPKfif", DemangledName: "vecadd(float*, float const*, int, float)", StaticHash: vecadd,
				Shapes: []db.ShapeStats{
					{GridDims: d1(4), BlockDims: d1(256), Launches: 3, TimedLaunches: 2, TimedNs: 20000},
					{GridDims: d1(8), BlockDims: d1(256), Launches: 1, FirstLaunchNs: 30000},
					{GridDims: d1(16), BlockDims: d1(256), Launches: 10, TimedLaunches: 5, TimedNs: 250000},
				},
				Args: []db.ArgStats{
					{Index: 0, Size: 8, Tracked: true, Invariant: true, Distinct: 1, Values: []db.ArgValue{{Bytes: u64(testArena), Launches: 14}}},
					{Index: 1, Size: 8, Tracked: true, Invariant: true, Distinct: 1, Values: []db.ArgValue{{Bytes: u64(testArena + 0x200000), Launches: 14}}},
					{Index: 2, Size: 4, Tracked: true, Distinct: 3, Values: []db.ArgValue{{Bytes: u32(1000), Launches: 3}, {Bytes: u32(2000), Launches: 1}, {Bytes: u32(4000), Launches: 10}}},
					{Index: 3, Size: 4, Tracked: true, Invariant: true, Distinct: 1, Values: []db.ArgValue{{Bytes: u32(math.Float32bits(2.5)), Launches: 14}}},
				}},
			{KernelName: "_Z7stencil6Paramsd", DemangledName: "stencil(Params, double)", StaticHash: stencil,
				Shapes: []db.ShapeStats{{GridDims: mneme.Dim3{X: 128, Y: 128, Z: 1}, BlockDims: mneme.Dim3{X: 16, Y: 16, Z: 1}, SharedMem: 4096, Launches: 1, TimedLaunches: 1, TimedNs: 1000000}},
				Args:   []db.ArgStats{{Index: 0, Size: 24}, {Index: 1, Size: 8, Tracked: true, Invariant: true, Distinct: 1, Values: []db.ArgValue{{Bytes: u64(math.Float64bits(-0.25)), Launches: 1}}}}},
			{KernelName: "_Z4initPf", EarlyLaunches: 1,
				Shapes: []db.ShapeStats{{GridDims: d1(1), BlockDims: d1(32), Launches: 2, TimedLaunches: 2, TimedNs: 10000}},
				Args:   []db.ArgStats{{Index: 0, Size: 8, Tracked: true, Invariant: true, Distinct: 1, Values: []db.ArgValue{{Bytes: u64(testArena), Launches: 2}}}}},
		},
	}
	s.Finish()
	return db.WriteLaunchStats(dir, s)
}
