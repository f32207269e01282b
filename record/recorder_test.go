package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/record/arena"
)

// simGPU is a host-memory GPU: byte-addressed device memory behind a
// virtual-memory interface with the driver's rules, kernels that are Go
// functions over that memory, and device globals at fixed addresses. The
// recorder drives it exactly as it drives the real device through the runtime library (cmd/mneme-rt).
type simGPU struct {
	gran     uint64
	base     uint64
	size     uint64
	mem      map[uint64][]byte // mapped chunks by address
	kernels  map[string]func(g *simGPU, l *Launch) error
	irs      map[string]*KernelIR
	globals  map[int][]Global
	syncErr  error
	launches int
	busyBase uint64 // a reservation at this base fails, as one the driver holds part of
}

func newSimGPU() *simGPU {
	return &simGPU{gran: 2 << 20, mem: map[uint64][]byte{}, kernels: map[string]func(*simGPU, *Launch) error{}, irs: map[string]*KernelIR{}, globals: map[int][]Global{}}
}

func (g *simGPU) Granularity() (uint64, error) { return g.gran, nil }
func (g *simGPU) Reserve(base, size uint64) error {
	if g.busyBase != 0 && base == g.busyBase {
		return fmt.Errorf("cuMemAddressReserve: asked for %d bytes at %#x, the driver could only give another (the range is in use)", size, base)
	}
	g.base, g.size = base, size
	return nil
}
func (g *simGPU) Map(addr, size uint64) error {
	for c := addr; c < addr+size; c += g.gran {
		if g.mem[c] != nil {
			return fmt.Errorf("chunk %#x mapped twice", c)
		}
		g.mem[c] = make([]byte, g.gran)
	}
	return nil
}

// span returns the device bytes [addr, addr+n) (within one mapping run).
func (g *simGPU) access(addr uint64, n int, fn func(dev []byte, off int)) error {
	for off := 0; off < n; {
		c := (addr + uint64(off)) / g.gran * g.gran
		chunk := g.mem[c]
		if chunk == nil {
			return fmt.Errorf("illegal address %#x", addr+uint64(off))
		}
		in := int(addr + uint64(off) - c)
		m := min(n-off, len(chunk)-in)
		fn(chunk[in:in+m], off)
		off += m
	}
	return nil
}

func (g *simGPU) write(addr uint64, data []byte) error {
	return g.access(addr, len(data), func(dev []byte, off int) { copy(dev, data[off:]) })
}

func (g *simGPU) CopyToHost(dst []byte, src uint64) error {
	return g.access(src, len(dst), func(dev []byte, off int) { copy(dst[off:], dev) })
}

func (g *simGPU) Synchronize() error { return g.syncErr }

func (g *simGPU) Launch(l *Launch) error {
	g.launches++
	k := g.kernels[l.Kernel.Name]
	if k == nil {
		return fmt.Errorf("no kernel %s", l.Kernel.Name)
	}
	return k(g, l)
}

func (g *simGPU) Globals(module int) ([]Global, error) { return g.globals[module], nil }

func (g *simGPU) KernelIR(name string) (*KernelIR, error) {
	ir := g.irs[name]
	if ir == nil {
		return nil, fmt.Errorf("no embedded IR defines %s", name)
	}
	return ir, nil
}

func (g *simGPU) Device() (db.DeviceInfo, error) {
	return db.DeviceInfo{Name: "Simulated GPU", ComputeCapability: "9.0", Arch: "sm_90", SMCount: 4, TotalMem: 1 << 30, DriverVersion: 13000}, nil
}
func (g *simGPU) Toolchain() db.Toolchain {
	return db.Toolchain{Mneme: "test", LLVM: "22.1.8", CUDA: "13.0"}
}

const saxpyName = "_Z5saxpyfPKfPfi"

// addSaxpy installs y[i] = a*x[i] + y[i] for i < n, one "thread" per element
// of grid*block.
func (g *simGPU) addSaxpy() {
	g.irs[saxpyName] = &KernelIR{Bitcode: []byte("BC\xc0\xde saxpy"), ArgNames: []string{"a", "x", "y", "n"}, ArgKinds: []mneme.ArgKind{"f32", "ptr", "ptr", "i32"}}
	g.kernels[saxpyName] = func(g *simGPU, l *Launch) error {
		a := math.Float32frombits(binary.LittleEndian.Uint32(l.Args[0]))
		x := binary.LittleEndian.Uint64(l.Args[1])
		y := binary.LittleEndian.Uint64(l.Args[2])
		n := int(int32(binary.LittleEndian.Uint32(l.Args[3])))
		threads := int(l.Grid.Count() * l.Block.Count())
		for i := 0; i < n && i < threads; i++ {
			var xb, yb [4]byte
			if err := g.CopyToHost(xb[:], x+uint64(4*i)); err != nil {
				return err
			}
			if err := g.CopyToHost(yb[:], y+uint64(4*i)); err != nil {
				return err
			}
			v := a*math.Float32frombits(binary.LittleEndian.Uint32(xb[:])) + math.Float32frombits(binary.LittleEndian.Uint32(yb[:]))
			binary.LittleEndian.PutUint32(yb[:], math.Float32bits(v))
			if err := g.write(y+uint64(4*i), yb[:]); err != nil {
				return err
			}
		}
		return nil
	}
}

func floats(vs ...float32) []byte {
	b := make([]byte, 4*len(vs))
	for i, v := range vs {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

func u32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func u64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

func saxpyLaunch(a float32, x, y uint64, n uint32) *Launch {
	return &Launch{
		Kernel: Kernel{Name: saxpyName, Demangled: "saxpy(float, float const*, float*, int)"},
		Grid:   mneme.Dim3{X: 1, Y: 1, Z: 1}, Block: mneme.Dim3{X: 4, Y: 1, Z: 1},
		Args: [][]byte{floats(a), u64(x), u64(y), u32(n)},
	}
}

type fixture struct {
	t   *testing.T
	gpu *simGPU
	rec *Recorder
	dir string
	log bytes.Buffer
	x   uint64
	y   uint64
}

func newFixture(t *testing.T, mutate func(*Config)) *fixture {
	t.Helper()
	f := &fixture{t: t, gpu: newSimGPU(), dir: filepath.Join(t.TempDir(), "rdb")}
	f.gpu.addSaxpy()
	cfg := Config{DB: f.dir, VABase: arena.DefaultBase, VASize: 64 << 20, Log: &f.log}
	if mutate != nil {
		mutate(&cfg)
	}
	rec, err := New(cfg, f.gpu, f.gpu)
	if err != nil {
		t.Fatal(err)
	}
	f.rec = rec
	return f
}

// setup allocates x and y through the recorder and fills them, as an
// application's cudaMalloc and cudaMemcpy would.
func (f *fixture) setup() {
	var err error
	if f.x, err = f.rec.Malloc(16); err != nil {
		f.t.Fatal(err)
	}
	if f.y, err = f.rec.Malloc(16); err != nil {
		f.t.Fatal(err)
	}
	if err := f.gpu.write(f.x, floats(1, 2, 3, 4)); err != nil {
		f.t.Fatal(err)
	}
	if err := f.gpu.write(f.y, floats(10, 20, 30, 40)); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) launch(l *Launch) Decision {
	f.t.Helper()
	d, err := f.rec.Launch(l)
	if err != nil {
		f.t.Fatalf("launch: %v", err)
	}
	if d != Launched {
		if err := f.gpu.Launch(l); err != nil { // the shim forwards it
			f.t.Fatal(err)
		}
	}
	return d
}

func (f *fixture) open() *db.DB {
	f.t.Helper()
	d, err := db.Open(f.dir)
	if err != nil {
		f.t.Fatalf("database does not read back: %v", err)
	}
	return d
}

func TestRecordsPrologueEpilogueAndMetadata(t *testing.T) {
	f := newFixture(t, nil)
	f.gpu.globals[0] = []Global{{Name: "counter", Addr: f.gpu.base - 4096, Size: 8}}
	// The global lives outside the arena: map a chunk for it.
	f.setup()
	f.gpu.globals[0][0].Addr = f.gpu.base + 62<<20
	if err := f.gpu.Map(f.gpu.base+62<<20, f.gpu.gran); err != nil {
		t.Fatal(err)
	}
	f.gpu.write(f.gpu.globals[0][0].Addr, u64(77))

	if d := f.launch(saxpyLaunch(2, f.x, f.y, 4)); d != Launched {
		t.Fatalf("decision %v, want Launched", d)
	}
	d := f.open()
	if len(d.Kernels) != 1 || d.NumInstances() != 1 {
		t.Fatalf("%d kernels, %d instances; want 1, 1", len(d.Kernels), d.NumInstances())
	}
	k, inst, err := d.Find("")
	if err != nil {
		t.Fatal(err)
	}
	if k.KernelName != saxpyName || k.DemangledName != "saxpy(float, float const*, float*, int)" {
		t.Errorf("names %q %q", k.KernelName, k.DemangledName)
	}
	if fmt.Sprint(k.ArgKinds) != "[f32 ptr ptr i32]" || fmt.Sprint(k.ArgSizes) != "[4 8 8 4]" || fmt.Sprint(k.Specializations) != "[true false false true]" || fmt.Sprint(k.ArgNames) != "[a x y n]" {
		t.Errorf("argument metadata %v %v %v %v", k.ArgKinds, k.ArgSizes, k.Specializations, k.ArgNames)
	}
	if k.Rank != nil {
		t.Errorf("a recording outside an MPI job says rank %d", *k.Rank)
	}
	if k.VAddr != "0x153940000000" || k.VASize != MinReservation || k.Device.Name != "Simulated GPU" || k.Toolchain.LLVM != "22.1.8" {
		t.Errorf("arena/device/toolchain %s %d %+v %+v", k.VAddr, k.VASize, k.Device, k.Toolchain)
	}
	ir, err := os.ReadFile(d.IRPath(k))
	if err != nil || !bytes.Equal(ir, f.gpu.irs[saxpyName].Bitcode) {
		t.Errorf("IR file: %v", err)
	}
	if inst.GridDims != (mneme.Dim3{X: 1, Y: 1, Z: 1}) || inst.BlockDims != (mneme.Dim3{X: 4, Y: 1, Z: 1}) || inst.Occurrences != 1 {
		t.Errorf("instance %+v", inst)
	}
	pro, err := d.ReadPrologue(k, inst)
	if err != nil {
		t.Fatal(err)
	}
	epi, err := d.ReadEpilogue(k, inst)
	if err != nil {
		t.Fatal(err)
	}
	if len(pro.Blobs) != 2 || pro.Blobs[0].Addr != f.x || !bytes.Equal(pro.Blobs[1].Data, floats(10, 20, 30, 40)) {
		t.Errorf("prologue blobs %+v", pro.Blobs)
	}
	if !bytes.Equal(epi.Blobs[1].Data, floats(12, 24, 36, 48)) || !bytes.Equal(epi.Blobs[0].Data, floats(1, 2, 3, 4)) {
		t.Errorf("epilogue y = %v", epi.Blobs[1].Data)
	}
	if len(pro.Globals) != 1 || pro.Globals[0].Name != "counter" || !bytes.Equal(pro.Globals[0].Data, u64(77)) {
		t.Errorf("globals %+v", pro.Globals)
	}
	if len(pro.Args) != 4 || !bytes.Equal(pro.Args[0], floats(2)) {
		t.Errorf("args %x", pro.Args)
	}
	st, err := ReadStatus(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.InstancesRecorded != 1 || st.KernelsRecorded != 1 || st.LaunchesSeen != 1 || st.SnapshotBytes == 0 || st.SnapshotRawBytes != 2*(16+16+8+24) || len(st.Errors) != 0 {
		t.Errorf("status %+v", st)
	}
	assertNoTempFiles(t, f.dir)
}

// assertNoTempFiles checks that only finished files are in the directory,
// apart from the status file.
func assertNoTempFiles(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") && e.Name() != StatusFileName {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}

// In an MPI job the kernel says which rank recorded it.
func TestRankIsRecorded(t *testing.T) {
	rank := 3
	f := newFixture(t, func(c *Config) { c.Rank = &rank })
	f.setup()
	if d := f.launch(saxpyLaunch(2, f.x, f.y, 4)); d != Launched {
		t.Fatalf("decision %v, want Launched", d)
	}
	k, _, err := f.open().Find("")
	if err != nil {
		t.Fatal(err)
	}
	if k.Rank == nil || *k.Rank != 3 {
		t.Errorf("kernel rank %v, want 3", k.Rank)
	}
	c, err := ConfigFromEnv(func(v string) string { return map[string]string{EnvDB: "d", EnvRank: "3"}[v] })
	if err != nil || c.Rank == nil || *c.Rank != 3 {
		t.Errorf("%s=3: %v, %v", EnvRank, c.Rank, err)
	}
	if _, err := ConfigFromEnv(func(v string) string { return map[string]string{EnvDB: "d", EnvRank: "-1"}[v] }); err == nil || !strings.Contains(err.Error(), EnvRank) {
		t.Errorf("%s=-1: %v", EnvRank, err)
	}
}

func TestScalarArgumentsMakeDistinctInstancesAndRepeatsCount(t *testing.T) {
	f := newFixture(t, nil)
	f.setup()
	f.launch(saxpyLaunch(2, f.x, f.y, 4))
	if d := f.launch(saxpyLaunch(2, f.x, f.y, 4)); d != Forward {
		t.Fatalf("repeat launch: %v, want Forward", d)
	}
	f.launch(saxpyLaunch(3, f.x, f.y, 4))
	f.rec.Finish()
	d := f.open()
	if d.NumInstances() != 2 {
		t.Fatalf("%d instances, want 2 (a differs)", d.NumInstances())
	}
	occ := map[string]int{}
	for _, r := range d.All() {
		occ[r.Instance.Args[0]] = r.Instance.Occurrences
	}
	if occ[fmt.Sprintf("%x", floats(2))] != 2 || occ[fmt.Sprintf("%x", floats(3))] != 1 {
		t.Errorf("occurrences %v", occ)
	}
	// The second instance's prologue is the first one's output.
	for _, r := range d.All() {
		if r.Instance.Args[0] == fmt.Sprintf("%x", floats(3)) {
			pro, _ := d.ReadPrologue(r.Kernel, r.Instance)
			if !bytes.Equal(pro.Blobs[1].Data, floats(14, 28, 42, 56)) {
				t.Errorf("prologue of the third launch %v", pro.Blobs[1].Data)
			}
		}
	}
	if st, _ := ReadStatus(f.dir); !st.Finished {
		t.Error("status not marked finished")
	}
}

// saxpySkip1Cap2 selects saxpy only, skips its first launch and records at
// most 2 of its instances.
func saxpySkip1Cap2(c *Config) {
	c.Kernels = regexp.MustCompile(`^saxpy\(`)
	c.Skip = 1
	c.MaxRecordings = 2
}

func TestSelectionSkipAndCap(t *testing.T) {
	f := newFixture(t, saxpySkip1Cap2)
	f.setup()
	other := &Launch{Kernel: Kernel{Name: "_Z5otherv", Demangled: "other()"}, Grid: mneme.Dim3{X: 1, Y: 1, Z: 1}, Block: mneme.Dim3{X: 1, Y: 1, Z: 1}}
	f.gpu.kernels["_Z5otherv"] = func(*simGPU, *Launch) error { return nil }
	if d := f.launch(other); d != ForwardAlways {
		t.Errorf("unselected kernel: %v, want ForwardAlways", d)
	}
	want := []Decision{Forward, Launched, Launched, Forward, Forward}
	for i, a := range []float32{1, 2, 3, 4, 2} {
		if d := f.launch(saxpyLaunch(a, f.x, f.y, 4)); d != want[i] {
			t.Errorf("launch %d (a=%v): %v, want %v", i, a, d, want[i])
		}
	}
	f.rec.Finish()
	d := f.open()
	if d.NumInstances() != 2 {
		t.Fatalf("%d instances, want 2", d.NumInstances())
	}
	for _, r := range d.All() {
		if r.Instance.Args[0] == fmt.Sprintf("%x", floats(1)) {
			t.Error("the skipped launch was recorded")
		}
		if r.Instance.Args[0] == fmt.Sprintf("%x", floats(2)) && r.Instance.Occurrences != 2 {
			t.Errorf("a=2 occurrences %d, want 2", r.Instance.Occurrences)
		}
	}
	st := f.rec.Status()
	if st.LaunchesSeen != 6 || st.LaunchesSelected != 5 || st.InstancesRecorded != 2 {
		t.Errorf("status %+v", st)
	}
}

// shapeFixture records saxpy under --max-recordings cap; launch(a, grid)
// shows the recorder a launch with that argument and grid and performs it
// when the recorder does not.
func shapeFixture(t *testing.T, cap int) (*fixture, func(a float32, grid uint32) (Decision, Memo)) {
	f := newFixture(t, func(c *Config) { c.MaxRecordings = cap })
	f.setup()
	return f, func(a float32, grid uint32) (Decision, Memo) {
		t.Helper()
		l := saxpyLaunch(a, f.x, f.y, 4)
		l.Grid.X = grid
		d, m, err := f.rec.LaunchMemo(l)
		if err != nil {
			t.Fatal(err)
		}
		if d != Launched {
			if err := f.gpu.Launch(l); err != nil {
				t.Fatal(err)
			}
		}
		return d, m
	}
}

// instancesByGrid counts the database's instances by grid.
func instancesByGrid(f *fixture) map[uint32]int {
	f.rec.Finish()
	grids := map[uint32]int{}
	for _, r := range f.open().All() {
		grids[r.Instance.GridDims.X]++
	}
	return grids
}

// TestCapMakesRoomForNewShapes: under --max-recordings a kernel fills its
// instances with distinct launches as before; once full, a launch shape no
// instance has takes the place of a second instance of a shape (a step
// counter's later value), and the memo tells the shim which launches it
// need not show: the covered shapes' once full, every new one only when
// no instance can give way any more.
func TestCapMakesRoomForNewShapes(t *testing.T) {
	f, launch := shapeFixture(t, 3)
	step := float32(0)
	next := func() float32 { step++; return step }
	if d, m := launch(next(), 1); d != Launched || m.ShapeCovered || m.Capped || m.Repeat == 0 {
		t.Errorf("first launch: %v %+v, want Launched, nothing covered", d, m)
	}
	for i := range 2 {
		if d, m := launch(next(), 1); d != Launched || m.ShapeCovered != (i == 1) || m.Capped {
			t.Errorf("step %d of one shape: %v %+v, want Launched (filling), covered once full", i+2, d, m)
		}
	}
	if d, m := launch(next(), 1); d != Forward || m != (Memo{ShapeCovered: true}) {
		t.Errorf("a new step of a covered shape when full: %v %+v, want Forward, shape covered", d, m)
	}
	// Grid 2: the third step gives way; grid 3: the second.
	if d, m := launch(next(), 2); d != Launched || !m.ShapeCovered || m.Capped {
		t.Errorf("second shape: %v %+v, want Launched, not capped", d, m)
	}
	if d, _ := launch(next(), 3); d != Launched {
		t.Errorf("third shape: %v, want Launched", d)
	}
	if got := instancesByGrid(f); len(got) != 3 || got[1] != 1 || got[2] != 1 || got[3] != 1 {
		t.Errorf("instances by grid %v, want one each of 1, 2 and 3", got)
	}
	for _, r := range f.open().All() {
		if r.Instance.GridDims.X == 1 && r.Instance.Args[0] != fmt.Sprintf("%x", floats(1)) {
			t.Errorf("grid 1 kept step %s, want the first", r.Instance.Args[0])
		}
	}
	if st := f.rec.Status(); st.InstancesReplaced != 2 || st.InstancesRecorded != 5 {
		t.Errorf("status: %d replaced, %d recorded; want 2 and 5", st.InstancesReplaced, st.InstancesRecorded)
	}
}

// TestCapPrefersLargerShapes: with one instance per shape and the kernel
// full, a larger launch (more threads) takes the place of the smallest, a
// smaller one does not; a size sweep recorded with --max-recordings 1
// keeps its largest size. The replacements are bounded: past N + 8 the
// kernel is capped for good.
func TestCapPrefersLargerShapes(t *testing.T) {
	f, launch := shapeFixture(t, 1)
	for _, grid := range []uint32{2, 4, 8} {
		if d, _ := launch(1, grid); d != Launched {
			t.Errorf("grid %d: %v, want Launched (larger than what is kept)", grid, d)
		}
	}
	if d, m := launch(1, 3); d != Forward || m != (Memo{ShapeCovered: true}) {
		t.Errorf("a smaller grid: %v %+v, want Forward, shape covered", d, m)
	}
	if got := instancesByGrid(f); len(got) != 1 || got[8] != 1 {
		t.Errorf("instances by grid %v, want the largest (8) alone", got)
	}

	g, launch := shapeFixture(t, 1)
	var last Memo
	for grid := uint32(1); grid <= 1+1+evictionSlack+1; grid++ {
		d, m := launch(1, grid)
		if want := grid <= 1+1+evictionSlack; (d == Launched) != want {
			t.Errorf("grid %d: %v, want Launched %v", grid, d, want)
		}
		last = m
	}
	if !last.Capped {
		t.Errorf("past %d replacements: memo %+v, want capped", 1+evictionSlack, last)
	}
	if got := instancesByGrid(g); len(got) != 1 || got[1+1+evictionSlack] != 1 {
		t.Errorf("instances by grid %v, want grid %d alone", got, 1+1+evictionSlack)
	}
}

// TestCapKeepsTheInstanceWhenTheNewShapeIsNotRecorded: an instance that
// was to give way stays when the new launch could not be recorded.
func TestCapKeepsTheInstanceWhenTheNewShapeIsNotRecorded(t *testing.T) {
	f, launch := shapeFixture(t, 1)
	launch(1, 1)
	f.gpu.syncErr = errors.New("an earlier launch of the application failed")
	if d, _ := launch(1, 2); d != Forward {
		t.Errorf("a launch that cannot be recorded: %v, want Forward", d)
	}
	f.gpu.syncErr = nil
	if got := instancesByGrid(f); len(got) != 1 || got[1] != 1 {
		t.Errorf("instances by grid %v, want the first (grid 1) kept", got)
	}
}

// TestNoCapRecordsEveryDistinctLaunch: without a cap nothing is covered.
func TestNoCapRecordsEveryDistinctLaunch(t *testing.T) {
	f, launch := shapeFixture(t, 0)
	for i := range 3 {
		if d, m := launch(float32(i+1), 1); d != Launched || m.ShapeCovered || m.Capped {
			t.Errorf("uncapped launch %d: %v %+v, want Launched, nothing covered", i, d, m)
		}
	}
	if got := instancesByGrid(f); got[1] != 3 {
		t.Errorf("instances by grid %v, want 3 of grid 1", got)
	}
}

// TestMemoLetsTheCallerCountRepeats: LaunchMemo names recorded instances
// and says when a kernel's shape is covered, never during --skip; the counts the
// caller reports for what it decided alone end up in the occurrences and
// the status exactly as if every launch had been shown.
func TestMemoLetsTheCallerCountRepeats(t *testing.T) {
	f := newFixture(t, saxpySkip1Cap2)
	f.setup()
	launch := func(a float32) (Decision, Memo) {
		t.Helper()
		l := saxpyLaunch(a, f.x, f.y, 4)
		d, m, err := f.rec.LaunchMemo(l)
		if err != nil {
			t.Fatal(err)
		}
		if d != Launched {
			if err := f.gpu.Launch(l); err != nil {
				t.Fatal(err)
			}
		}
		return d, m
	}
	if _, m := launch(1); m != (Memo{}) {
		t.Errorf("skipped launch: memo %+v, want none", m)
	}
	d, m2 := launch(2)
	if d != Launched || m2.Repeat == 0 || m2.Capped {
		t.Errorf("first instance: %v %+v, want Launched with a repeat, not capped", d, m2)
	}
	if _, m := launch(2); m != m2 {
		t.Errorf("a repeat shown anyway: memo %+v, want %+v", m, m2)
	}
	d, m3 := launch(3)
	if d != Launched || m3.Repeat == 0 || m3.Repeat == m2.Repeat || !m3.ShapeCovered || m3.Capped {
		t.Errorf("second instance: %v %+v, want Launched, another repeat, its shape covered (a new shape may still come)", d, m3)
	}
	if _, m := launch(4); m != (Memo{ShapeCovered: true}) {
		t.Errorf("a launch past the cap: memo %+v, want its shape covered only", m)
	}
	other := Kernel{Name: "_Z5otherv", Demangled: "other()"}
	f.gpu.kernels["_Z5otherv"] = func(*simGPU, *Launch) error { return nil }
	if d, _ := f.rec.Launch(&Launch{Kernel: other, Grid: mneme.Dim3{X: 1, Y: 1, Z: 1}, Block: mneme.Dim3{X: 1, Y: 1, Z: 1}}); d != ForwardAlways {
		t.Fatalf("unselected kernel: %v", d)
	}
	// What a shim decided alone: 5 more of a=2, 1 of a=3, 7 past the cap,
	// 9 of the unselected kernel.
	f.rec.AddRepeats(m2.Repeat, 5)
	f.rec.AddRepeats(m3.Repeat, 1)
	f.rec.AddForwarded(saxpyLaunch(0, 0, 0, 0).Kernel, 7)
	f.rec.AddForwarded(other, 9)
	f.rec.AddRepeats(99, 1) // an unknown repeat is ignored
	f.rec.Finish()
	occ := map[string]int{}
	for _, r := range f.open().All() {
		occ[r.Instance.Args[0]] = r.Instance.Occurrences
	}
	if occ[fmt.Sprintf("%x", floats(2))] != 7 || occ[fmt.Sprintf("%x", floats(3))] != 2 || len(occ) != 2 {
		t.Errorf("occurrences %v, want a=2: 7, a=3: 2", occ)
	}
	st := f.rec.Status()
	if st.LaunchesSeen != 6+5+1+7+9 || st.LaunchesSelected != 5+5+1+7 {
		t.Errorf("launches seen %d, selected %d; want 28 and 18", st.LaunchesSeen, st.LaunchesSelected)
	}
}

func TestArenaExhaustionIsReportedWithVass(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.VASize = 4 << 20 })
	if _, err := f.rec.Malloc(3 << 20); err != nil {
		t.Fatal(err)
	}
	_, err := f.rec.Malloc(3 << 20)
	var ex *arena.ExhaustedError
	if !errors.As(err, &ex) {
		t.Fatalf("got %v, want an exhaustion error", err)
	}
	st, _ := ReadStatus(f.dir)
	if !strings.Contains(st.ArenaError, "-vass") || len(st.Errors) != 1 {
		t.Errorf("status %+v", st)
	}
	if !strings.Contains(f.log.String(), "-vass") {
		t.Errorf("stderr %q lacks -vass", f.log.String())
	}
}

// With -vass auto the arena is as large as the GPU's memory (the simulated
// GPU has 1 GiB); an allocation it cannot serve fails, and is reported once,
// naming its size, however often the application tries again.
func TestAutoArenaHasTheGPUsSizeAndReportsExhaustionOnce(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.VASize = 0 })
	for i := 0; i < 3; i++ {
		if _, err := f.rec.Malloc(2 << 30); err == nil {
			t.Fatal("a 2 GiB allocation succeeded in a 1 GiB auto arena")
		}
	}
	if _, err := f.rec.Malloc(512 << 20); err != nil {
		t.Fatalf("half the GPU's memory: %v", err)
	}
	if got := f.rec.arena.Size(); got != 1<<30 {
		t.Errorf("auto arena size %d, want the GPU's 1 GiB", got)
	}
	st, _ := ReadStatus(f.dir)
	if len(st.Errors) != 1 || !strings.Contains(st.Errors[0], "2147483648 bytes") || !strings.Contains(st.Errors[0], "cudaErrorMemoryAllocation") {
		t.Errorf("status errors %q: want one naming the 2147483648-byte allocation", st.Errors)
	}
}

func TestParseVASSAuto(t *testing.T) {
	for _, s := range []string{"", "auto", " auto "} {
		if n, err := ParseVASS(s); err != nil || n != 0 {
			t.Errorf("ParseVASS(%q) = %d, %v; want 0 (auto)", s, n, err)
		}
	}
	if n, err := ParseVASS("0.5"); err != nil || n != 1<<29 {
		t.Errorf("ParseVASS(0.5) = %d, %v", n, err)
	}
}

func TestKernelWithoutIRIsReportedAndForwarded(t *testing.T) {
	f := newFixture(t, nil)
	f.setup()
	delete(f.gpu.irs, saxpyName)
	if d := f.launch(saxpyLaunch(2, f.x, f.y, 4)); d != ForwardAlways {
		t.Fatalf("decision %v, want ForwardAlways", d)
	}
	st := f.rec.Status()
	if len(st.Errors) != 1 || !strings.Contains(st.Errors[0], "no embedded IR") || st.InstancesRecorded != 0 {
		t.Errorf("status %+v", st)
	}
	if ents, _ := filepath.Glob(filepath.Join(f.dir, "*.json")); len(ents) != 0 {
		t.Errorf("kernel files written for an unrecordable kernel: %v", ents)
	}
}

func TestFaultWhileRecordingWritesNothing(t *testing.T) {
	f := newFixture(t, nil)
	f.setup()
	f.launch(saxpyLaunch(2, f.x, f.y, 4))
	fault := errors.New("cudaErrorIllegalAddress: an illegal memory access was encountered")
	f.gpu.kernels[saxpyName] = func(g *simGPU, l *Launch) error { g.syncErr = fault; return nil }
	d, err := f.rec.Launch(saxpyLaunch(5, f.x, f.y, 4))
	if d != Launched || !errors.Is(err, fault) {
		t.Fatalf("faulting launch: %v %v", d, err)
	}
	if n := f.open().NumInstances(); n != 1 {
		t.Errorf("%d instances after the fault, want the 1 recorded before", n)
	}
	if st := f.rec.Status(); len(st.Errors) != 1 || !strings.Contains(st.Errors[0], "illegal") {
		t.Errorf("status errors %v", st.Errors)
	}
	assertNoTempFiles(t, f.dir)
}

func TestFreeReturnsArenaBlocksOnly(t *testing.T) {
	f := newFixture(t, nil)
	f.setup()
	if ours, err := f.rec.Free(0x7000_0000_0000); ours || err != nil {
		t.Errorf("foreign pointer: ours=%v err=%v", ours, err)
	}
	if ours, err := f.rec.Free(f.x); !ours || err != nil {
		t.Errorf("arena pointer: ours=%v err=%v", ours, err)
	}
	f.launch(saxpyLaunch(2, f.y, f.y, 4))
	k, inst, err := f.open().Find("")
	if err != nil {
		t.Fatal(err)
	}
	pro, _ := f.open().ReadPrologue(k, inst)
	if len(pro.Blobs) != 1 || pro.Blobs[0].Addr != f.y {
		t.Errorf("freed block still snapshotted: %+v", pro.Blobs)
	}
}

func TestConfigFromEnv(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	c, err := ConfigFromEnv(env(EnvDB, "/tmp/x", EnvVASS, "0.5", EnvVABase, "0x7f0000000000", EnvKernels, "saxpy", EnvMaxRecordings, "4", EnvSkip, "2", EnvCompress, "1"))
	if err != nil {
		t.Fatal(err)
	}
	if c.DB != "/tmp/x" || c.VASize != 512<<20 || c.VABase != 0x7f0000000000 || !c.VABaseChosen || c.MaxRecordings != 4 || c.Skip != 2 || !c.Compress || !c.Selects("_Z5saxpyv", "") || c.Selects("_Z3addv", "add()") {
		t.Errorf("config %+v", c)
	}
	if c, err := ConfigFromEnv(env(EnvDB, "d", EnvCompress, "0")); err != nil || c.Compress {
		t.Errorf("%s=0: compress %v, %v", EnvCompress, c.Compress, err)
	}
	c, err = ConfigFromEnv(env(EnvDB, "d"))
	if err != nil || c.VASize != 0 /* auto: the GPU's memory */ || c.VABase != arena.DefaultBase || c.VABaseChosen || !c.Selects("anything", "") || !c.Compress {
		t.Errorf("defaults %+v %v", c, err)
	}
	for _, bad := range [][]string{
		{},
		{EnvDB, "d", EnvVASS, "-1"},
		{EnvDB, "d", EnvVASS, "lots"},
		{EnvDB, "d", EnvVABase, "zz"},
		{EnvDB, "d", EnvKernels, "("},
		{EnvDB, "d", EnvMaxRecordings, "-3"},
		{EnvDB, "d", EnvSkip, "x"},
		{EnvDB, "d", EnvCompress, "yes"},
	} {
		_, err := ConfigFromEnv(env(bad...))
		name := EnvDB
		if len(bad) > 2 {
			name = bad[2]
		}
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%v: error %v does not name %s", bad, err, name)
		}
	}
}

// BenchmarkRecordInstance measures recording one instance with 64 MiB of
// live allocations (prologue + epilogue written): bytes/s is the snapshot
// write throughput, with and without zstd.
func BenchmarkRecordInstance(b *testing.B) {
	for _, data := range []string{"random", "smooth"} {
		for _, compress := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/zstd=%v", data, compress), func(b *testing.B) {
				gpu := newSimGPU()
				gpu.addSaxpy()
				gpu.kernels[saxpyName] = func(*simGPU, *Launch) error { return nil }
				rec, err := New(Config{DB: b.TempDir(), VABase: arena.DefaultBase, VASize: 1 << 30, Compress: compress, Log: &bytes.Buffer{}}, gpu, gpu)
				if err != nil {
					b.Fatal(err)
				}
				const n = 64 << 20
				x, err := rec.Malloc(n)
				if err != nil {
					b.Fatal(err)
				}
				buf := make([]byte, n)
				rng := rand.New(rand.NewSource(1))
				for i := 0; i < n; i += 4 {
					v := float32(rng.NormFloat64())
					if data == "smooth" {
						v = float32(i/4%1000) * 0.5 // a field with structure, as simulations have
					}
					binary.LittleEndian.PutUint32(buf[i:], math.Float32bits(v))
				}
				gpu.write(x, buf)
				b.SetBytes(2 * n)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if d, err := rec.Launch(saxpyLaunch(float32(i), x, x, 0)); d != Launched || err != nil {
						b.Fatal(d, err)
					}
				}
				b.StopTimer()
				st := rec.Status()
				b.ReportMetric(float64(st.SnapshotBytes)/float64(2*n*b.N), "stored/raw")
			})
		}
	}
}

// codedGPU is a simGPU that also hands over the registered device code.
type codedGPU struct{ *simGPU }

func (g codedGPU) DeviceCode(module int) ([]byte, error) {
	return []byte(fmt.Sprintf("fatbin of module %d", module)), nil
}

// The kernel's database entry names its fat binary, written once, and keeps
// the compile flags embedded with its IR.
func TestDeviceCodeAndCompileFlagsAreRecorded(t *testing.T) {
	gpu := newSimGPU()
	gpu.addSaxpy()
	gpu.irs[saxpyName].Flags = []string{"-O2", "-Xcuda-ptxas", "-maxrregcount=64"}
	dir := filepath.Join(t.TempDir(), "rdb")
	var log bytes.Buffer
	rec, err := New(Config{DB: dir, VABase: arena.DefaultBase, VASize: 64 << 20, Log: &log}, codedGPU{gpu}, gpu)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, gpu: gpu, rec: rec, dir: dir}
	f.setup()
	f.launch(saxpyLaunch(2, f.x, f.y, 4))
	f.launch(saxpyLaunch(3, f.x, f.y, 4))
	d := f.open()
	k := d.Kernels[0]
	if k.DeviceCode == "" || !strings.HasPrefix(k.DeviceCode, "DeviceCode_") {
		t.Fatalf("DeviceCode %q", k.DeviceCode)
	}
	data, err := os.ReadFile(filepath.Join(dir, k.DeviceCode))
	if err != nil || string(data) != "fatbin of module 0" {
		t.Fatalf("device code file: %q, %v", data, err)
	}
	if strings.Join(k.CompileFlags, " ") != "-O2 -Xcuda-ptxas -maxrregcount=64" {
		t.Errorf("CompileFlags %q", k.CompileFlags)
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "DeviceCode_*"))
	if len(matches) != 1 {
		t.Errorf("%d device code files, want 1 shared by the instances", len(matches))
	}
}

// An arena whose default base the driver holds part of moves a TiB up, and
// the recording names the base it got; a base the user chose is not moved.
func TestArenaMovesOffABusyBase(t *testing.T) {
	f := newFixture(t, nil)
	f.gpu.busyBase = arena.DefaultBase
	f.setup()
	moved := uint64(arena.DefaultBase + arenaBaseStride)
	if f.x < moved || f.x >= moved+64<<20 {
		t.Fatalf("allocation at %#x, want one in the arena at %#x", f.x, moved)
	}
	if d := f.launch(saxpyLaunch(2, f.x, f.y, 4)); d != Launched {
		t.Fatalf("decision %v, want Launched", d)
	}
	k, _, err := f.open().Find("")
	if err != nil {
		t.Fatal(err)
	}
	if k.VAddr != db.FormatVAddr(moved) {
		t.Errorf("the kernel file names the arena at %s, want %s", k.VAddr, db.FormatVAddr(moved))
	}

	chosen := newFixture(t, func(c *Config) { c.VABaseChosen = true })
	chosen.gpu.busyBase = arena.DefaultBase
	if _, err := chosen.rec.Malloc(16); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("with MNEME_VA_BASE the arena moved, or failed without saying why: %v", err)
	}
}

// TestManagedAllocationsAreListedWithTheStatus: the shim's managed
// allocations are counted and listed in the database with the next status
// write, where replay finds them.
func TestManagedAllocationsAreListedWithTheStatus(t *testing.T) {
	f := newFixture(t, nil)
	f.rec.Managed(0x7f0000000000, 4096)
	f.rec.ReportError("something worth a status") // writes the status
	l, err := db.ReadManaged(f.dir)
	if err != nil || len(l.Allocations) != 1 || l.Allocations[0] != (db.ManagedAllocation{Addr: "0x7f0000000000", Size: 4096}) || f.rec.Status().ManagedAllocations != 1 {
		t.Fatalf("list %+v, %v; status %+v", l, err, f.rec.Status())
	}
}

// TestManagedVariablesAreListed: the __managed__ variables of a recorded
// kernel's module are listed (once, with the address the runtime gave
// them) and left out of the snapshot, which holds the other globals.
func TestManagedVariablesAreListed(t *testing.T) {
	f := newFixture(t, nil)
	f.setup()
	f.gpu.globals[0] = []Global{{Name: "tally", Managed: true, Size: 4, Addr: 0x7e0000000000}}
	for range 2 {
		if d := f.launch(saxpyLaunch(2, f.x, f.y, 4)); d != Launched && d != Forward {
			t.Fatalf("decision %v", d)
		}
	}
	l, err := db.ReadManaged(f.dir)
	if err != nil || len(l.Variables) != 1 || l.Variables[0] != (db.ManagedVariable{Name: "tally", Size: 4, Addr: "0x7e0000000000"}) {
		t.Fatalf("list %+v, %v", l, err)
	}
	k, inst, err := f.open().Find("")
	if err != nil {
		t.Fatal(err)
	}
	pro, err := f.open().ReadPrologue(k, inst)
	if err != nil {
		t.Fatal(err)
	}
	if len(pro.Globals) != 0 {
		t.Errorf("the snapshot holds the managed variable: %+v", pro.Globals)
	}
}
