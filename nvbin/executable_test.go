package nvbin

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

func TestFatbinKernels(t *testing.T) {
	got, err := FatbinKernels(readTestdata(t, "vecadd.nv_fatbin"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"_Z4vaddPKfS0_Pfif", "_Z5scalePfi"} {
		if !slices.Contains(got, want) {
			t.Errorf("kernels %q: %s missing", got, want)
		}
	}
	if !slices.IsSorted(got) {
		t.Errorf("kernels %q not sorted", got)
	}
	if _, err := FatbinKernels(readTestdata(t, "vecadd.nv_fatbin")[:700]); err == nil {
		t.Error("a truncated fat binary listed kernels")
	}
}

// An executable's kernels come from its .nv_fatbin section; one without the
// section has none, and a file that is not ELF is an error naming it.
func TestExecutableKernels(t *testing.T) {
	objcopy, err := exec.LookPath("objcopy")
	if err != nil {
		t.Skip("no objcopy: ", err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	plain, withFatbin := filepath.Join(dir, "plain"), filepath.Join(dir, "app")
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(plain, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(objcopy, "--add-section", FatbinSection+"=testdata/small-ptx.nv_fatbin", plain, withFatbin).CombinedOutput(); err != nil {
		t.Skipf("objcopy: %v\n%s", err, out)
	}
	got, err := ExecutableKernels(withFatbin)
	if err != nil || !slices.Equal(got, []string{"_Z6vecaddPKfS0_Pfi"}) {
		t.Errorf("with the section: %q, %v", got, err)
	}
	if got, err := ExecutableKernels(plain); err != nil || got != nil {
		t.Errorf("without the section: %q, %v", got, err)
	}
	if _, err := ExecutableKernels("testdata/README.md"); err == nil {
		t.Error("a text file was read as an executable")
	}
}

func FuzzFatbinKernels(f *testing.F) {
	f.Add(readTestdata(f, "vecadd.nv_fatbin"))
	f.Add(readTestdata(f, "small-ptx.nv_fatbin"))
	f.Fuzz(func(t *testing.T, data []byte) {
		names, err := FatbinKernels(data)
		if err != nil {
			return
		}
		if !slices.IsSorted(names) || len(slices.Compact(slices.Clone(names))) != len(names) {
			t.Fatalf("names %q: not sorted or repeated", names)
		}
	})
}
