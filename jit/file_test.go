package jit

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/llvm"
)

// irFile writes the test kernels' bitcode to a file, as `mneme compile --ir` reads it.
func irFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kernels.bc")
	if err := os.WriteFile(path, testIR(t), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func fileJob(ir string) FileJob {
	return FileJob{IR: ir, Kernel: repeatAxpy, Config: baseConfig(), Emit: "ptx", Output: "-", NoGPU: true}
}

func TestCompileFileFoldsArgumentsIntoPTX(t *testing.T) {
	job := fileJob(irFile(t))
	job.Args = []string{"1=777"}
	var stdout, stderr bytes.Buffer
	if err := CompileFile(job, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`\b777\b`).MatchString(stdout.String()) {
		t.Fatalf("the folded argument is not a literal in the PTX:\n%s", stdout.String())
	}
	if !regexp.MustCompile(`^mneme: _Z11repeat_axpyiifPKfPf for sm_90: preprocess [0-9.]+ ms, optimize [0-9.]+ ms, codegen [0-9.]+ ms\n$`).MatchString(stderr.String()) {
		t.Fatalf("summary line: %q", stderr.String())
	}
}

func TestCompileFileJSONReportAndOutputFile(t *testing.T) {
	job := fileJob(irFile(t))
	job.JSON, job.Emit = true, "ll"
	job.Output = filepath.Join(t.TempDir(), "out.ll")
	var stdout bytes.Buffer
	if err := CompileFile(job, &stdout, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	var rep FileReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("report %q: %v", stdout.String(), err)
	}
	if rep.Kernel != repeatAxpy || rep.Linked || rep.PTXBytes == 0 || rep.Registers != nil {
		t.Fatalf("report without a GPU: %+v", rep)
	}
	ir, err := os.ReadFile(job.Output)
	if err != nil || !strings.Contains(string(ir), "define") {
		t.Fatalf("optimized IR in %s: %v\n%s", job.Output, err, ir)
	}
}

func TestCompileFileClassifiesFailures(t *testing.T) {
	ir := irFile(t)
	notIR := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(notIR, []byte("hello, not bitcode"), 0o644); err != nil {
		t.Fatal(err)
	}
	isInput := func(err error) bool { var ie *mneme.InputError; return errors.As(err, &ie) }
	for _, c := range []struct {
		name  string
		edit  func(*FileJob)
		input bool // bad input, as opposed to the other kinds below
		noGPU bool
		check func(error) bool
	}{
		{name: "no file named", edit: func(j *FileJob) { j.IR = "" }, input: true},
		{name: "missing file", edit: func(j *FileJob) { j.IR = ir + ".missing" }, input: true},
		{name: "not IR", edit: func(j *FileJob) { j.IR = notIR }, input: true},
		{name: "unknown kernel", edit: func(j *FileJob) { j.Kernel = "nope" }, input: true},
		{name: "argument out of range", edit: func(j *FileJob) { j.Args = []string{"9=1"} }, input: true},
		{name: "argument not a number", edit: func(j *FileJob) { j.Args = []string{"1=abc"} }, input: true},
		{name: "unknown emit", edit: func(j *FileJob) { j.Emit = "sass" }, input: true},
		{name: "cubin without a GPU", edit: func(j *FileJob) { j.Emit = "cubin" }, noGPU: true},
		{name: "invalid pipeline", edit: func(j *FileJob) { j.Config.Passes = "default<O3>,no-such-pass" },
			check: func(err error) bool { return errors.Is(err, llvm.ErrInvalidPipeline) }},
	} {
		job := fileJob(ir)
		c.edit(&job)
		var stdout bytes.Buffer
		err := CompileFile(job, &stdout, &bytes.Buffer{})
		switch {
		case err == nil:
			t.Errorf("%s: no error", c.name)
		case isInput(err) != c.input:
			t.Errorf("%s: %v: InputError %v, want %v", c.name, err, isInput(err), c.input)
		case errors.Is(err, mneme.ErrNoGPU) != c.noGPU:
			t.Errorf("%s: %v: matches ErrNoGPU %v, want %v", c.name, err, !c.noGPU, c.noGPU)
		case c.check != nil && !c.check(err):
			t.Errorf("%s: %v is not of its kind", c.name, err)
		case stdout.Len() > 0:
			t.Errorf("%s: wrote %d bytes of code despite the error", c.name, stdout.Len())
		}
	}
}
