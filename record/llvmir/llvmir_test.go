package llvmir

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/appabi"
	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/llvm"
	"github.com/mneme-gpu/mneme/record"
)

const saxpy = "_Z5saxpyfPKfPfi"

// deviceBitcode compiles a CUDA file to unoptimized device bitcode, as the
// compiler wrapper embeds it.
func deviceBitcode(t testing.TB, src string) []byte {
	t.Helper()
	clang, err := exec.LookPath("clang++-22")
	if err != nil {
		t.Skip("clang++-22 not found: ", err)
	}
	out := filepath.Join(t.TempDir(), "k.bc")
	cmd := exec.Command(clang, "-x", "cuda", "--cuda-device-only", "-nocudainc", "-nocudalib", "--cuda-gpu-arch=sm_90",
		"-Xclang", "-target-feature", "-Xclang", "+ptx80", "-O3", "-Xclang", "-disable-llvm-passes", "-emit-llvm", "-c", src, "-o", out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", cmd, err, msg)
	}
	bc, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return bc
}

func TestExtractKernelClassifiesParameters(t *testing.T) {
	bc := deviceBitcode(t, "testdata/kernels.cu")
	ir, defined, err := Tools{}.ExtractKernel(bc, "kernels.cu", saxpy)
	if err != nil || !defined {
		t.Fatalf("saxpy: defined=%v err=%v", defined, err)
	}
	if fmt.Sprint(ir.ArgKinds) != "[f32 ptr ptr i32]" {
		t.Errorf("kinds %v", ir.ArgKinds)
	}
	m, err := llvm.ParseBitcode(ir.Bitcode, "extracted")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Dispose()
	if k := m.Kernels(); !slices.Equal(k, []string{saxpy}) {
		t.Errorf("extracted module defines kernels %v, want only saxpy", k)
	}
	other, defined, err := Tools{}.ExtractKernel(bc, "kernels.cu", "_Z5otherPi4Pairb")
	if err != nil || !defined {
		t.Fatalf("other: defined=%v err=%v", defined, err)
	}
	if len(other.ArgKinds) != 3 || other.ArgKinds[0] != "ptr" {
		t.Errorf("other kinds %v", other.ArgKinds)
	}
	if _, defined, err := (Tools{}).ExtractKernel(bc, "kernels.cu", "_Z7missingv"); defined || err != nil {
		t.Errorf("missing kernel: defined=%v err=%v", defined, err)
	}
	if _, _, err := (Tools{}).ExtractKernel([]byte("not bitcode"), "junk.bc", saxpy); err == nil {
		t.Error("garbage accepted as bitcode")
	}
}

// tuProcess is an application without device memory whose embedded IR is
// one translation unit, as the runtime library hands it to the recorder.
type tuProcess struct{ tu []byte }

func (p tuProcess) Synchronize() error { return nil }
func (p tuProcess) CopyToHost(dst []byte, src uint64) error {
	return fmt.Errorf("no memory at %#x", src)
}
func (p tuProcess) Launch(*record.Launch) error          { return nil }
func (p tuProcess) Globals(int) ([]record.Global, error) { return nil, nil }
func (p tuProcess) KernelIR(string) (*record.KernelIR, error) {
	return &record.KernelIR{Bitcode: p.tu}, nil
}
func (p tuProcess) Device() (db.DeviceInfo, error) {
	return db.DeviceInfo{Name: "none", Arch: "sm_90"}, nil
}
func (p tuProcess) Toolchain() db.Toolchain { return db.Toolchain{Mneme: "test"} }

func recordSaxpy(t *testing.T, tu []byte) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "rdb")
	rec, err := record.New(record.Config{DB: dir, VABase: 0x153940000000, VASize: 1 << 30, Log: &bytes.Buffer{}}, tuProcess{tu}, nil)
	if err != nil {
		t.Fatal(err)
	}
	args := [][]byte{
		binary.LittleEndian.AppendUint32(nil, math.Float32bits(2)),
		binary.LittleEndian.AppendUint64(nil, 0x153940000000),
		binary.LittleEndian.AppendUint64(nil, 0x153940200000),
		binary.LittleEndian.AppendUint32(nil, 1024),
	}
	l := &record.Launch{Kernel: record.Kernel{Name: saxpy, Demangled: "saxpy(float, float const*, float*, int)"},
		Grid: mneme.Dim3{X: 4, Y: 1, Z: 1}, Block: mneme.Dim3{X: 256, Y: 1, Z: 1}, Args: args}
	if d, err := rec.Launch(l); d != record.Launched || err != nil {
		t.Fatalf("launch: %v %v; status %+v", d, err, rec.Status())
	}
	rec.Finish()
	return dir
}

func TestFinalizeExtractsAndClassifies(t *testing.T) {
	tu := deviceBitcode(t, "testdata/kernels.cu")
	dir := recordSaxpy(t, tu)
	d, err := db.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if k := d.Kernels[0]; fmt.Sprint(k.ArgKinds) != "[byval:4 byval:8 byval:8 byval:4]" {
		t.Fatalf("kinds before finalizing %v, want raw bytes", k.ArgKinds)
	}
	for _, r := range record.Finalize(dir, Tools{}, nil) {
		if r.Err != nil {
			t.Fatalf("finalize %s: %v", r.File, r.Err)
		}
	}
	d, err = db.Open(dir)
	if err != nil {
		t.Fatalf("after finalizing the database does not read back: %v", err)
	}
	k := d.Kernels[0]
	if fmt.Sprint(k.ArgKinds) != "[f32 ptr ptr i32]" || fmt.Sprint(k.Specializations) != "[true false false true]" {
		t.Errorf("kinds %v specializations %v", k.ArgKinds, k.Specializations)
	}
	ir, err := os.ReadFile(d.IRPath(k))
	if err != nil {
		t.Fatal(err)
	}
	m, err := llvm.ParseBitcode(ir, "recorded")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Dispose()
	if got := m.Kernels(); !slices.Equal(got, []string{saxpy}) || len(ir) >= len(tu) {
		t.Errorf("recorded IR defines %v in %d bytes (unit: %d)", got, len(ir), len(tu))
	}
	// Running it again changes nothing.
	before, _ := os.ReadFile(filepath.Join(dir, db.KernelFileName(k.StaticHash)))
	for _, r := range record.Finalize(dir, Tools{}, nil) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	after, _ := os.ReadFile(filepath.Join(dir, db.KernelFileName(k.StaticHash)))
	if !bytes.Equal(before, after) {
		t.Error("a second finalize changed the kernel file")
	}
}

func TestFinalizeFallsBackToTheExecutable(t *testing.T) {
	wrong := deviceBitcode(t, "testdata/other.cu")
	right := deviceBitcode(t, "testdata/kernels.cu")
	dir := recordSaxpy(t, wrong)
	res := record.Finalize(dir, Tools{}, nil)
	if len(res) != 1 || res[0].Err == nil {
		t.Fatalf("finalize without a defining module: %+v", res)
	}
	res = record.Finalize(dir, Tools{}, func() ([]appabi.IREntry, error) {
		return []appabi.IREntry{{Name: "other.cu", Bitcode: wrong}, {Name: "kernels.cu", Bitcode: right}}, nil
	})
	if len(res) != 1 || res[0].Err != nil {
		t.Fatalf("finalize with the executable's modules: %+v", res)
	}
	d, err := db.Open(dir)
	if err != nil || fmt.Sprint(d.Kernels[0].ArgKinds) != "[f32 ptr ptr i32]" {
		t.Fatalf("after fallback: %v %v", err, d)
	}
}
