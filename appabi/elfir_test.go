package appabi

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mneme-gpu/mneme"
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

	// A section header claiming 3 GiB, more than the file holds: refused
	// as bad input before anything of that size is allocated.
	data, err := os.ReadFile(embedded)
	must(err)
	crafted := filepath.Join(dir, "crafted")
	must(os.WriteFile(crafted, setSectionSize(t, data, IRSection, 3<<30), 0o644))
	_, err = ExecutableIR(crafted)
	var in *mneme.InputError
	if !errors.As(err, &in) || !strings.Contains(err.Error(), "crafted: section mneme_ir: 3221225472 bytes") || !strings.Contains(err.Error(), "past the end") {
		t.Errorf("a section of 3 GiB in a small file: %v", err)
	}
	// Its real size again: read as before (the crafting changed nothing else).
	must(os.WriteFile(crafted, setSectionSize(t, data, IRSection, uint64(len(sec))), 0o644))
	if got, err := ExecutableIR(crafted); err != nil || len(got) != 2 {
		t.Errorf("the section at its own size: %+v %v", got, err)
	}

	// A FIFO as the executable: refused at once, not waited on.
	fifo := filepath.Join(dir, "fifo")
	must(syscall.Mkfifo(fifo, 0o644))
	done := make(chan error, 1)
	go func() { _, err := ExecutableIR(fifo); done <- err }()
	select {
	case err := <-done:
		if !errors.As(err, &in) || !strings.Contains(err.Error(), "not a regular file (a FIFO)") {
			t.Errorf("a FIFO: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a FIFO as the executable blocked")
	}
}

// setSectionSize rewrites the sh_size of the named section of a 64-bit
// little-endian ELF file.
func setSectionSize(t *testing.T, data []byte, name string, size uint64) []byte {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	out := bytes.Clone(data)
	shoff := binary.LittleEndian.Uint64(data[0x28:])
	shentsize := uint64(binary.LittleEndian.Uint16(data[0x3a:]))
	for i, s := range f.Sections {
		if s.Name == name {
			binary.LittleEndian.PutUint64(out[shoff+uint64(i)*shentsize+0x20:], size)
			return out
		}
	}
	t.Fatalf("no section %s", name)
	return nil
}
