package appabi

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestExecutableIR(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler: ", err)
	}
	objcopy, err := exec.LookPath("objcopy")
	if err != nil {
		t.Skip("no objcopy: ", err)
	}
	dir := t.TempDir()
	a := IREntry{Name: "a.cu", Bitcode: []byte("BC\xc0\xde first")}
	b := IREntry{Name: "b.cu", Bitcode: []byte("BC\xc0\xde second unit")}
	sec := append(EncodeIREntry(a), EncodeIREntry(b)...)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "sec"), sec, 0o644))
	must(os.WriteFile(filepath.Join(dir, "main.c"), []byte("int main(void) { return 0; }\n"), 0o644))
	plain, embedded := filepath.Join(dir, "plain"), filepath.Join(dir, "embedded")
	for _, c := range [][]string{
		{cc, "-o", plain, filepath.Join(dir, "main.c")},
		{objcopy, "--add-section", "mneme_ir=" + filepath.Join(dir, "sec"), plain, embedded},
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", c, err, out)
		}
	}
	got, err := ExecutableIR(embedded)
	if err != nil || len(got) != 2 || got[1].Name != "b.cu" || !bytes.Equal(got[1].Bitcode, b.Bitcode) {
		t.Fatalf("embedded: %+v %v", got, err)
	}
	if got, err := ExecutableIR(plain); err != nil || got != nil {
		t.Errorf("no section: %+v %v", got, err)
	}
	if _, err := ExecutableIR(filepath.Join(dir, "main.c")); err == nil || !strings.Contains(err.Error(), "main.c") {
		t.Errorf("not an ELF file: %v", err)
	}
}
