package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/record"
	"github.com/mneme-gpu/mneme/record/inject"
)

type noDevice struct{}

func (noDevice) Synchronize() error                      { return nil }
func (noDevice) CopyToHost(dst []byte, src uint64) error { return nil }
func (noDevice) Describe() (db.DeviceInfo, error)        { return db.DeviceInfo{Arch: "sm_90"}, nil }
func (noDevice) GlobalAddress(int, string) (uint64, uint64, error) {
	return 0, 0, errors.New("no variables")
}

// A kernel recorded through the driver has no IR: inspect says so and names
// its device code instead of reporting the IR missing.
func TestInspectMachineCodeKernel(t *testing.T) {
	dir := t.TempDir()
	rec, err := inject.New(record.Config{DB: dir, Log: &bytes.Buffer{}}, noDevice{})
	if err != nil {
		t.Fatal(err)
	}
	l := &inject.Launch{Kernel: "_Z5scalePfi", Image: rec.Image([]byte("cubin")), Grid: mneme.Dim3{X: 1, Y: 1, Z: 1}, Block: mneme.Dim3{X: 32, Y: 1, Z: 1}}
	rec.LaunchEnd(rec.LaunchBegin(l), nil)
	d, err := db.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	doc := describeDB(d)
	k := doc.Kernels[0]
	if k.Code != db.CodeMachine || k.DeviceCode == nil || !k.DeviceCode.Present || k.IRModule.File != "" {
		t.Errorf("kernel %+v: want machine code with its device code present and no IR module", k)
	}
	var out bytes.Buffer
	if err := printInspectTable(&out, doc); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "(machine code only)") || strings.Contains(out.String(), "IR missing") {
		t.Errorf("listing:\n%s", out.String())
	}
}
