package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/zeebo/xxh3"

	"github.com/mneme-gpu/mneme/appabi"
	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/llvm"
	"github.com/mneme-gpu/mneme/nvbin"
)

// The hostile-input suite: recordings, results folders, protocol lines and
// command lines crafted the way a shared or damaged one can be. Every case
// runs the mneme command in a child process under an 8 GiB address-space
// limit and checks its exit code, that its message names the file and field,
// that it ends promptly, and that no file outside its folder changed.

// envRunAsCLI makes the test binary run the mneme command line instead of
// the tests, so the suite can start it under `ulimit -v`.
const envRunAsCLI = "MNEME_TEST_RUN_AS_CLI"

// addressSpaceLimitKiB is the `ulimit -v` every case runs under: 8 GiB.
const addressSpaceLimitKiB = 8 << 20

// hostileTimeout is how long a case may take; each should end within a
// second, the margin is for loaded machines.
const hostileTimeout = 10 * time.Second

// hostileEnv is one case's world: a valid database in Dir/db, a folder
// outside it whose files must not change, and the database's kernels.
type hostileEnv struct {
	t       *testing.T
	Dir     string
	DB      string
	Outside string
	Vecadd  *db.Kernel
	Stencil *db.Kernel
}

// hostileIR is bitcode holding both kernels of the test database, so loads
// get past the IR check to the part a case attacks.
const hostileIR = `target triple = "nvptx64-nvidia-cuda"
%struct.Params = type { ptr, ptr, i64 }
define ptx_kernel void @_Z6vecaddPfPKfif(ptr %y, ptr %x, i32 %n, float %a) {
  ret void
}
define ptx_kernel void @_Z7stencil6Paramsd(ptr byval(%struct.Params) align 8 %p, double %w) {
  ret void
}
`

func newHostileEnv(t *testing.T) *hostileEnv {
	t.Helper()
	h := &hostileEnv{t: t, Dir: t.TempDir()}
	h.DB = filepath.Join(h.Dir, "db")
	h.Outside = filepath.Join(h.Dir, "outside")
	if err := buildTestDB(h.DB); err != nil {
		t.Fatal(err)
	}
	mod, err := llvm.ParseIR(hostileIR, "hostile.ll")
	if err != nil {
		t.Fatal(err)
	}
	bc := mod.Bitcode()
	mod.Dispose()
	d, err := db.Open(h.DB)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range d.Kernels {
		h.write(filepath.Join(h.DB, k.Modules[0]), bc)
		switch k.KernelName {
		case "_Z6vecaddPfPKfif":
			h.Vecadd = k
		case "_Z7stencil6Paramsd":
			h.Stencil = k
		}
	}
	if err := os.MkdirAll(h.Outside, 0o755); err != nil {
		t.Fatal(err)
	}
	h.write(filepath.Join(h.Outside, "precious"), []byte("must not change\n"))
	return h
}

func (h *hostileEnv) write(path string, data []byte) {
	h.t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		h.t.Fatal(err)
	}
}

func (h *hostileEnv) must(err error) {
	h.t.Helper()
	if err != nil {
		h.t.Fatal(err)
	}
}

// instance is the first instance of k in id order.
func (h *hostileEnv) instance(k *db.Kernel) *db.Instance { return k.Instances[k.InstanceIDs()[0]] }

// fifo puts a FIFO in place of path.
func (h *hostileEnv) fifo(path string) {
	os.Remove(path)
	h.must(syscall.Mkfifo(path, 0o644))
}

// symlink puts a link to target in place of path.
func (h *hostileEnv) symlink(target, path string) {
	os.Remove(path)
	h.must(os.Symlink(target, path))
}

// rewriteKernel writes k back after edit, as a valid kernel file.
func (h *hostileEnv) rewriteKernel(k *db.Kernel, edit func(*db.Kernel)) {
	edit(k)
	h.must(db.WriteKernel(h.DB, k))
}

// plantPrologue replaces the prologue of inst with data, recording its size
// in the kernel file as the recorder would.
func (h *hostileEnv) plantPrologue(k *db.Kernel, inst *db.Instance, data []byte) {
	h.write(filepath.Join(h.DB, inst.Prologue), data)
	h.rewriteKernel(k, func(*db.Kernel) { inst.PrologueBytes = uint64(len(data)) })
}

func (h *hostileEnv) plantEpilogue(k *db.Kernel, inst *db.Instance, data []byte) {
	h.write(filepath.Join(h.DB, inst.Epilogue), data)
	h.rewriteKernel(k, func(*db.Kernel) { inst.EpilogueBytes = uint64(len(data)) })
}

// bombSnapshot is a valid snapshot of a few KiB that declares one blob of
// size bytes at addr, all of it zero chunks of 64 MiB: 64 GiB take 16 KiB.
func bombSnapshot(addr, size uint64) []byte {
	const chunk = 64 << 20
	u32 := binary.LittleEndian.AppendUint32
	u64 := binary.LittleEndian.AppendUint64
	b := []byte("MNEMESNP")
	b = u32(u32(u32(u32(b, db.FormatVersion), 0), chunk), 0)
	b = u64(b, 0) // globals
	b = u64(b, 1) // blobs
	b = u64(u64(u64(b, (size+4095)/4096*4096), size), addr)
	for i := uint64(0); i < (size+chunk-1)/chunk; i++ {
		b = append(b, 2, 0, 0, 0) // zero chunk, reserved
		b = u64(u32(b, 0), 0)     // stored length, checksum
	}
	b = u64(b, 0) // blob metadata length
	b = u64(b, 0) // arguments
	b = append(b, "MNEMEEND"...)
	return u64(b, xxh3.Hash(b))
}

// hostileCase is one crafted input and what mneme must make of it.
type hostileCase struct {
	name  string
	setup func(h *hostileEnv) (args []string, stdin string)
	code  int
	// stderr must contain each of these; for exit code 2 it is one line.
	stderr []string
	stdout []string
	// check, when set, inspects the folder after the run.
	check func(h *hostileEnv, stdout string)
}

var hostileCases = []hostileCase{
	{
		name: "snapshot declaring 64 GiB of zero chunks outside the arena",
		setup: func(h *hostileEnv) ([]string, string) {
			inst := h.instance(h.Vecadd)
			h.plantPrologue(h.Vecadd, inst, bombSnapshot(testArena, 64<<30))
			return []string{"replay", "-rdb", "db", "--kernel", "_Z6vecaddPfPKfif", "-rid", inst.DynamicHash}, ""
		},
		code:   2,
		stderr: []string{"DeviceState.prologue.", "blob 0: size 68719476736", "outside the recording arena", "VASize"},
	},
	{
		name: "snapshot declaring 64 GiB of zero chunks inside a 128 GiB arena",
		setup: func(h *hostileEnv) ([]string, string) {
			h.rewriteKernel(h.Vecadd, func(k *db.Kernel) { k.VASize = 128 << 30 })
			inst := h.instance(h.Vecadd)
			h.plantPrologue(h.Vecadd, inst, bombSnapshot(testArena, 64<<30))
			return []string{"replay", "-rdb", "db", "--kernel", "_Z6vecaddPfPKfif", "-rid", inst.DynamicHash}, ""
		},
		code:   2,
		stderr: []string{"DeviceState.prologue.", "(68719476736 bytes)", "DeviceState.epilogue."},
	},
	{
		name: "a matching pair of snapshots of 64 GiB of zero chunks streams without host memory",
		setup: func(h *hostileEnv) ([]string, string) {
			h.rewriteKernel(h.Vecadd, func(k *db.Kernel) { k.VASize = 128 << 30 })
			inst := h.instance(h.Vecadd)
			h.plantPrologue(h.Vecadd, inst, bombSnapshot(testArena, 64<<30))
			h.plantEpilogue(h.Vecadd, inst, bombSnapshot(testArena, 64<<30))
			return []string{"replay", "-rdb", "db", "--kernel", "_Z6vecaddPfPKfif", "-rid", inst.DynamicHash}, ""
		},
		// A valid recording: under the address-space limit it is streamed
		// and compared window by window, and only the missing GPU (hidden
		// from every case) stops it.
		code:   6,
		stderr: []string{"GPU"},
	},
	{
		name: "snapshot declaring more live memory than the recording device had",
		setup: func(h *hostileEnv) ([]string, string) {
			h.rewriteKernel(h.Vecadd, func(k *db.Kernel) { k.VASize, k.Device.TotalMem = 128<<30, 80<<30 })
			inst := h.instance(h.Vecadd)
			h.plantPrologue(h.Vecadd, inst, bombSnapshot(testArena, 96<<30))
			return []string{"replay", "-rdb", "db", "--kernel", "_Z6vecaddPfPKfif", "-rid", inst.DynamicHash}, ""
		},
		code:   2,
		stderr: []string{"DeviceState.prologue.", "blob 0: size 103079215104", "Device.TotalMem"},
	},
	{
		name: "snapshot bomb: the worker answers open with an error",
		setup: func(h *hostileEnv) ([]string, string) {
			inst := h.instance(h.Vecadd)
			h.plantPrologue(h.Vecadd, inst, bombSnapshot(testArena, 64<<30))
			return []string{"worker"}, fmt.Sprintf(`{"id":1,"op":"open","open":{"db":"db","kernel":"_Z6vecaddPfPKfif","instance":%q,"iterations":1}}`+"\n", inst.DynamicHash)
		},
		code:   0,
		stdout: []string{`"id":1,"ok":false`, "DeviceState.prologue.", "outside the recording arena"},
	},
	{
		name: "snapshot bomb: a compile-only worker reads no snapshot data",
		setup: func(h *hostileEnv) ([]string, string) {
			h.rewriteKernel(h.Vecadd, func(k *db.Kernel) { k.VASize = 128 << 30 })
			inst := h.instance(h.Vecadd)
			h.plantPrologue(h.Vecadd, inst, bombSnapshot(testArena, 64<<30))
			return []string{"worker"}, fmt.Sprintf(`{"id":1,"op":"open","open":{"db":"db","kernel":"_Z6vecaddPfPKfif","instance":%q,"iterations":1,"compile_only":true}}`+"\n"+`{"id":2,"op":"close"}`+"\n", inst.DynamicHash)
		},
		code:   0,
		stdout: []string{`"id":1,"ok":true`, `"id":2,"ok":true`},
	},
	{
		name: "snapshot whose size disagrees with the kernel file",
		setup: func(h *hostileEnv) ([]string, string) {
			inst := h.instance(h.Stencil)
			path := filepath.Join(h.DB, inst.Epilogue)
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			h.must(err)
			f.Write([]byte("trailing"))
			f.Close()
			return []string{"replay", "-rdb", "db", "--kernel", "_Z7stencil6Paramsd"}, ""
		},
		code:   2,
		stderr: []string{".json: instances[", "].EpilogueBytes is", "DeviceState.epilogue."},
	},
	{
		name: "compile-cache entries that are FIFOs",
		setup: func(h *hostileEnv) ([]string, string) {
			inst := h.instance(h.Stencil)
			session := fmt.Sprintf(`{"id":1,"op":"open","open":{"db":"db","kernel":"_Z7stencil6Paramsd","instance":%q,"iterations":1,"compile_only":true,"cache_dir":"cache"}}`+"\n"+
				`{"id":2,"op":"compile","config":{"passes":"default<O3>"}}`+"\n"+`{"id":3,"op":"close"}`+"\n", inst.DynamicHash)
			if code, stdout, stderr := h.run([]string{"worker"}, session); code != 0 || !strings.Contains(stdout, `"id":2,"ok":true`) {
				h.t.Fatalf("filling the cache: exit %d\n%s\n%s", code, stdout, stderr)
			}
			entries, _ := filepath.Glob(filepath.Join(h.Dir, "cache", "*", "*.json"))
			if len(entries) == 0 {
				h.t.Fatal("the compile left no cache entry")
			}
			for _, e := range entries {
				h.fifo(e)
			}
			return []string{"worker"}, session
		},
		code:   0,
		stdout: []string{`"id":2,"ok":true`, `"status":"verified"`},
	},
	{
		name: "kernel file that is a FIFO",
		setup: func(h *hostileEnv) ([]string, string) {
			h.fifo(filepath.Join(h.DB, h.Vecadd.StaticHash+".json"))
			return []string{"replay", "-rdb", "db", "--kernel", "_Z7stencil6Paramsd"}, ""
		},
		code:   2,
		stderr: []string{".json", "not a regular file (a FIFO)"},
	},
	{
		name: "recorded IR that is a link to /dev/zero",
		setup: func(h *hostileEnv) ([]string, string) {
			h.symlink("/dev/zero", filepath.Join(h.DB, h.Stencil.Modules[0]))
			return []string{"replay", "-rdb", "db", "--kernel", "_Z7stencil6Paramsd"}, ""
		},
		code:   2,
		stderr: []string{"RecordedIR_", "leads outside its folder"},
	},
	{
		name: "recorded IR that is a 20 GiB sparse file",
		setup: func(h *hostileEnv) ([]string, string) {
			h.must(os.Truncate(filepath.Join(h.DB, h.Stencil.Modules[0]), 20<<30))
			return []string{"replay", "-rdb", "db", "--kernel", "_Z7stencil6Paramsd"}, ""
		},
		code:   2,
		stderr: []string{"RecordedIR_", "file too large", "21474836480 bytes"},
	},
	{
		name: "recorded IR that is a FIFO",
		setup: func(h *hostileEnv) ([]string, string) {
			h.fifo(filepath.Join(h.DB, h.Stencil.Modules[0]))
			return []string{"replay", "-rdb", "db", "--kernel", "_Z7stencil6Paramsd"}, ""
		},
		code:   2,
		stderr: []string{"RecordedIR_", "not a regular file (a FIFO)"},
	},
	{
		name: "snapshot that is a link to a file outside the database",
		setup: func(h *hostileEnv) ([]string, string) {
			inst := h.instance(h.Stencil)
			outside := filepath.Join(h.Outside, "stolen.mneme")
			data, err := os.ReadFile(filepath.Join(h.DB, inst.Prologue))
			h.must(err)
			h.write(outside, data)
			h.symlink(outside, filepath.Join(h.DB, inst.Prologue))
			return []string{"replay", "-rdb", "db", "--kernel", "_Z7stencil6Paramsd"}, ""
		},
		code:   2,
		stderr: []string{"DeviceState.prologue.", "leads outside its folder"},
	},
	{
		name: "snapshot that is a FIFO",
		setup: func(h *hostileEnv) ([]string, string) {
			h.fifo(filepath.Join(h.DB, h.instance(h.Stencil).Epilogue))
			return []string{"replay", "-rdb", "db", "--kernel", "_Z7stencil6Paramsd"}, ""
		},
		code:   2,
		stderr: []string{"DeviceState.epilogue.", "not a regular file (a FIFO)"},
	},
	{
		name: "kernel file naming a key twice",
		setup: func(h *hostileEnv) ([]string, string) {
			path := filepath.Join(h.DB, h.Stencil.StaticHash+".json")
			data, err := os.ReadFile(path)
			h.must(err)
			h.write(path, bytes.Replace(data, []byte(`"KernelName": "_Z7stencil6Paramsd",`), []byte(`"KernelName": "_Z7stencil6Paramsd", "KernelName": "other",`), 1))
			return []string{"inspect", "db"}, ""
		},
		code:   2,
		stderr: []string{".json", "KernelName: the key appears twice"},
	},
	{
		name: "escape sequences in a database's names",
		setup: func(h *hostileEnv) ([]string, string) {
			h.rewriteKernel(h.Stencil, func(k *db.Kernel) { k.DemangledName = "stencil\x1b]0;owned\x07\x1b[2J" })
			return []string{"inspect", "db"}, ""
		},
		code:   0,
		stdout: []string{`stencil\x1b]0;owned\x07\x1b[2J`},
		check: func(h *hostileEnv, stdout string) {
			if strings.ContainsAny(stdout, "\x1b\x07") {
				h.t.Errorf("control characters reached the terminal: %q", stdout)
			}
		},
	},
	{
		name: "--ir /dev/zero",
		setup: func(h *hostileEnv) ([]string, string) {
			return []string{"compile", "--ir", "/dev/zero", "--kernel", "k"}, ""
		},
		code:   2,
		stderr: []string{"--ir", "/dev/zero", "not a regular file (a device)"},
	},
	{
		name: "--config /dev/zero",
		setup: func(h *hostileEnv) ([]string, string) {
			return h.tuneArgs("--config", "/dev/zero"), ""
		},
		code:   2,
		stderr: []string{"--config", "/dev/zero", "not a regular file (a device)"},
	},
	{
		name: "--workers 100000",
		setup: func(h *hostileEnv) ([]string, string) {
			return h.tuneArgs("--workers", "100000"), ""
		},
		code:   2,
		stderr: []string{"--workers 100000", "exceed the limit"},
	},
	{
		name: "--compile-workers 100000",
		setup: func(h *hostileEnv) ([]string, string) {
			return append(h.tuneArgs(), "--compile-workers", "100000"), ""
		},
		code:   2,
		stderr: []string{"--compile-workers 100000", "exceeds the limit"},
	},
	{
		name: "resume where trials.jsonl links to a file outside",
		setup: func(h *hostileEnv) ([]string, string) {
			out := h.resultsFolder()
			h.symlink(filepath.Join(h.Outside, "precious"), filepath.Join(out, "trials.jsonl"))
			return h.tuneArgs("--resume"), ""
		},
		code:   2,
		stderr: []string{"trials.jsonl", "leads outside its folder"},
	},
	{
		name: "resume where logs links to a folder outside",
		setup: func(h *hostileEnv) ([]string, string) {
			out := h.resultsFolder()
			os.RemoveAll(filepath.Join(out, "logs"))
			h.symlink(h.Outside, filepath.Join(out, "logs"))
			return h.tuneArgs("--resume"), ""
		},
		code:   2,
		stderr: []string{"logs", "leads outside its folder"},
	},
	{
		name: "resume where trials.jsonl is a FIFO",
		setup: func(h *hostileEnv) ([]string, string) {
			h.fifo(filepath.Join(h.resultsFolder(), "trials.jsonl"))
			return h.tuneArgs("--resume"), ""
		},
		code:   2,
		stderr: []string{"trials.jsonl", "not a regular file (a FIFO)"},
	},
	{
		name: "resume where geometry.json is a FIFO",
		setup: func(h *hostileEnv) ([]string, string) {
			h.fifo(filepath.Join(h.resultsFolder(), "geometry.json"))
			return h.tuneArgs("--resume"), ""
		},
		// Not read, so decided again; only the missing GPU stops the run.
		code:   6,
		stderr: []string{"GPU"},
	},
	{
		name: "resume with a complete trial line that does not parse",
		setup: func(h *hostileEnv) ([]string, string) {
			out := h.resultsFolder()
			h.write(filepath.Join(out, "trials.jsonl"), []byte("{\"number\":0}\n{\"number\": oops}\n"))
			return h.tuneArgs("--resume"), ""
		},
		code:   2,
		stderr: []string{"trials.jsonl:2:", "not a trial record"},
	},
	{
		name: "fresh run into a folder that is not a results folder",
		setup: func(h *hostileEnv) ([]string, string) {
			h.must(os.MkdirAll(filepath.Join(h.Dir, "out"), 0o755))
			h.write(filepath.Join(h.Dir, "out", "config.json"), []byte("someone else's config\n"))
			return h.tuneArgs(), ""
		},
		code:   2,
		stderr: []string{"--output out is not empty and is not a results directory", "config.json"},
		check: func(h *hostileEnv, _ string) {
			if data, _ := os.ReadFile(filepath.Join(h.Dir, "out", "config.json")); string(data) != "someone else's config\n" {
				h.t.Errorf("config.json of the folder was replaced: %q", data)
			}
		},
	},
	{
		name: "worker request line over 16 MiB",
		setup: func(h *hostileEnv) ([]string, string) {
			return []string{"worker"}, `{"id":1,"op":"compile","config":{"passes":"` + strings.Repeat("x", 17<<20) + `"}}` + "\n" + `{"id":2,"op":"close"}` + "\n"
		},
		code:   0,
		stdout: []string{`"ok":false,"error":"malformed request: the line is longer than the limit of 16777216 bytes"`, `"id":2,"ok":true`},
	},
	{
		name: "--specialize-args beyond the kernel's arguments",
		setup: func(h *hostileEnv) ([]string, string) {
			return []string{"replay", "-rdb", "db", "--kernel", "_Z7stencil6Paramsd", "--specialize-args", "99"}, ""
		},
		code:   2,
		stderr: []string{"specialize_args: argument 99 does not exist", "2 arguments"},
	},
	{
		name: "launch bounds below the block",
		setup: func(h *hostileEnv) ([]string, string) {
			return []string{"replay", "-rdb", "db", "--kernel", "_Z7stencil6Paramsd", "--launch-bounds", "32"}, ""
		},
		code:   2,
		stderr: []string{"max_threads 32", "below the block"},
	},
	{
		name: "grid over CUDA's limits",
		setup: func(h *hostileEnv) ([]string, string) {
			return []string{"replay", "-rdb", "db", "--kernel", "_Z7stencil6Paramsd", "--grid", "1,70000,1"}, ""
		},
		code:   2,
		stderr: []string{"grid", "exceeds CUDA's grid limits"},
	},
	{
		name: "--tolerance NaN",
		setup: func(h *hostileEnv) ([]string, string) {
			return []string{"replay", "-rdb", "db", "--kernel", "_Z7stencil6Paramsd", "--verify", "abs", "--tolerance", "NaN"}, ""
		},
		code:   2,
		stderr: []string{"--tolerance NaN"},
	},
	{
		name:   "a missing response file",
		setup:  func(h *hostileEnv) ([]string, string) { return []string{"cc", "@missing.rsp"}, "" },
		code:   2,
		stderr: []string{"response file missing.rsp: does not exist"},
	},
	{
		name: "deploy check of an executable that is a FIFO",
		setup: func(h *hostileEnv) ([]string, string) {
			h.write(filepath.Join(h.Dir, "tuned.json"), []byte(`{"_Z6vecaddPfPKfif":{"config":{}}}`))
			h.fifo(filepath.Join(h.Dir, "app"))
			return []string{"deploy", "check", "--tuned", "tuned.json", "app"}, ""
		},
		code:   2,
		stderr: []string{"app", "not a regular file (a FIFO)"},
	},
	{
		name: "deploy check of an nvcc build (fat binaries, no IR): each entry as the injection library applies it",
		setup: func(h *hostileEnv) ([]string, string) {
			h.executableWithFatbin(filepath.Join(h.Dir, "app"), 0)
			h.write(filepath.Join(h.Dir, "tuned.json"), []byte(`{"_Z6vecaddPKfS0_Pfi": {"config": {"max_registers": 32}},
				"_Z5otherv": {"config": {"max_registers": 32}}}`))
			return []string{"deploy", "check", "--tuned", "tuned.json", "app"}, ""
		},
		code:   0,
		stdout: []string{"PTX reassembled (ptxas_opt 0, max_registers 32)", "not-in-program", "1 of 2 tuned kernels", "CUDA_INJECTION64_PATH"},
	},
	{
		name: "deploy check of an executable whose fat binary is truncated",
		setup: func(h *hostileEnv) ([]string, string) {
			h.executableWithFatbin(filepath.Join(h.Dir, "app"), 700)
			h.write(filepath.Join(h.Dir, "tuned.json"), []byte(`{"_Z6vecaddPKfS0_Pfi": {"config": {"max_registers": 32}}}`))
			return []string{"deploy", "check", "--tuned", "tuned.json", "app"}, ""
		},
		code:   2,
		stderr: []string{"app", ".nv_fatbin", "truncated"},
	},
	{
		name: "deploy precompile of an executable that is a FIFO",
		setup: func(h *hostileEnv) ([]string, string) {
			h.write(filepath.Join(h.Dir, "tuned.json"), []byte(`{"_Z6vecaddPfPKfif":{"config":{}}}`))
			h.fifo(filepath.Join(h.Dir, "app"))
			return []string{"deploy", "precompile", "--tuned", "tuned.json", "app"}, ""
		},
		code:   2,
		stderr: []string{"app", "not a regular file (a FIFO)"},
	},
	{
		name: "a tuned-kernels file of more entries than any application has kernels",
		setup: func(h *hostileEnv) ([]string, string) {
			var b strings.Builder
			b.WriteString("{")
			for i := range 70000 {
				fmt.Fprintf(&b, `"k%d":{},`, i)
			}
			b.WriteString(`"k":{}}`)
			h.write(filepath.Join(h.Dir, "tuned.json"), []byte(b.String()))
			h.write(filepath.Join(h.Dir, "app"), []byte("\x7fELF"))
			return []string{"deploy", "check", "--tuned", "tuned.json", "app"}, ""
		},
		code:   2,
		stderr: []string{"tuned.json: more than 65536 kernels"},
	},
	{
		name: "deploy precompile --device -1 is refused before the GPU is looked for",
		setup: func(h *hostileEnv) ([]string, string) {
			h.executableWithIR(filepath.Join(h.Dir, "app"))
			h.write(filepath.Join(h.Dir, "tuned.json"), []byte(`{"_Z7stencil6Paramsd": {"config": {"passes": "default<O2>"}}}`))
			return []string{"deploy", "precompile", "--tuned", "tuned.json", "--device", "-1", "app"}, ""
		},
		code:   2,
		stderr: []string{"--device -1"},
	},
	{
		name:   "an unknown deploy command",
		setup:  func(h *hostileEnv) ([]string, string) { return []string{"deploy", "frobnicate"}, "" },
		code:   2,
		stderr: []string{`unknown command "frobnicate" for "mneme deploy"`},
	},
	{
		name: "--arch that is no architecture, checked before compiling",
		setup: func(h *hostileEnv) ([]string, string) {
			return []string{"compile", "--ir", filepath.Join("db", h.Stencil.Modules[0]), "--kernel", "_Z7stencil6Paramsd", "--no-gpu", "--arch", "sm_9x"}, ""
		},
		code:   2,
		stderr: []string{"--arch", `"sm_9x"`},
	},
	{
		name: "replay --device -1 is refused before the GPU is looked for",
		setup: func(h *hostileEnv) ([]string, string) {
			return []string{"replay", "-rdb", "db", "--kernel", "_Z7stencil6Paramsd", "--device", "-1"}, ""
		},
		code:   2,
		stderr: []string{"device -1"},
	},
	{
		name: "replay --dtype with a verification that compares no floats by it",
		setup: func(h *hostileEnv) ([]string, string) {
			return []string{"replay", "-rdb", "db", "--kernel", "_Z7stencil6Paramsd", "--dtype", "f64", "--verify", "bitwise"}, ""
		},
		code:   2,
		stderr: []string{"--dtype f64", "bitwise"},
	},
	{
		name: "a worker whose cache_dir is a FIFO compiles without the cache",
		setup: func(h *hostileEnv) ([]string, string) {
			h.fifo(filepath.Join(h.Dir, "cache"))
			return []string{"worker"}, fmt.Sprintf(`{"id":1,"op":"open","open":{"db":"db","kernel":"_Z7stencil6Paramsd","instance":%q,"iterations":1,"compile_only":true,"cache_dir":"cache"}}`+"\n"+
				`{"id":2,"op":"compile","config":{"passes":"default<O3>"}}`+"\n"+`{"id":3,"op":"close"}`+"\n", h.instance(h.Stencil).DynamicHash)
		},
		code:   0,
		stdout: []string{`"id":2,"ok":true`, `"id":3,"ok":true`},
	},
	{
		name: "compile --cache-dir that is a FIFO",
		setup: func(h *hostileEnv) ([]string, string) {
			h.fifo(filepath.Join(h.Dir, "cache"))
			return []string{"compile", "--ir", filepath.Join("db", h.Stencil.Modules[0]), "--kernel", "_Z7stencil6Paramsd", "--no-gpu", "--cache-dir", "cache"}, ""
		},
		code:   0,
		stdout: []string{".entry _Z7stencil6Paramsd"},
	},
	{
		name: "tune --resume into an --output that is a FIFO",
		setup: func(h *hostileEnv) ([]string, string) {
			h.fifo(filepath.Join(h.Dir, "out"))
			return h.tuneArgs("--resume"), ""
		},
		code:   2,
		stderr: []string{"out"},
	},
	{
		name: "record --overwrite into a -rdb that is a link to a folder outside",
		setup: func(h *hostileEnv) ([]string, string) {
			h.symlink(h.Outside, filepath.Join(h.Dir, "linked"))
			return []string{"record", "--overwrite", "-rdb", "linked", "--", "/bin/true"}, ""
		},
		code:   2,
		stderr: []string{"-rdb", "linked is a symbolic link"},
	},
	{
		name: "a worker compile of block.x = 0 is an invalid configuration, not block.x = 1",
		setup: func(h *hostileEnv) ([]string, string) {
			return []string{"worker"}, fmt.Sprintf(`{"id":1,"op":"open","open":{"db":"db","kernel":"_Z7stencil6Paramsd","instance":%q,"iterations":1,"compile_only":true}}`+"\n"+
				`{"id":2,"op":"compile","config":{"block":{"x":0,"y":1,"z":1}}}`+"\n"+`{"id":3,"op":"close"}`+"\n", h.instance(h.Stencil).DynamicHash)
		},
		code:   0,
		stdout: []string{`"id":2,"ok":true`, `"status":"invalid_config"`, "block 0,1,1"},
	},
	{
		name: "deploy check: an unparseable pipeline is invalid, not deployed; names are escaped",
		setup: func(h *hostileEnv) ([]string, string) {
			h.executableWithIR(filepath.Join(h.Dir, "app"))
			h.write(filepath.Join(h.Dir, "tuned.json"), []byte(`{
				"_Z6vecaddPfPKfif": {"config": {"passes": "default<O3>,no-such-pass"}},
				"_Z7stencil6Paramsd": {"config": {"passes": "default<O2>"}},
				"\u001b]0;owned\u0007\u001b[2J": {"config": {}}}`))
			return []string{"deploy", "check", "--tuned", "tuned.json", "app"}, ""
		},
		code:   0,
		stdout: []string{"_Z6vecaddPfPKfif", "invalid", "no-such-pass", "_Z7stencil6Paramsd", "deployed", `\x1b]0;owned\x07\x1b[2J`, "1 of 3 tuned kernels"},
		check: func(h *hostileEnv, stdout string) {
			if strings.ContainsAny(stdout, "\x1b\x07") {
				h.t.Errorf("control characters reached the terminal: %q", stdout)
			}
		},
	},
	{
		name: "a worker whose compile crashed LLVM answers and exits, to be replaced",
		setup: func(h *hostileEnv) ([]string, string) {
			deep := strings.Repeat("function(", 5000) + "instcombine" + strings.Repeat(")", 5000)
			return []string{"worker"}, fmt.Sprintf(`{"id":1,"op":"open","open":{"db":"db","kernel":"_Z7stencil6Paramsd","instance":%q,"iterations":1,"compile_only":true}}`+"\n"+
				`{"id":2,"op":"compile","config":{"passes":%q}}`+"\n"+`{"id":3,"op":"compile","config":{"passes":"default<O3>"}}`+"\n", h.instance(h.Stencil).DynamicHash, deep)
		},
		code:   5,
		stdout: []string{`"id":2,"ok":true`, `"status":"compile_error"`, `"closing":true`},
		stderr: []string{"LLVM"},
		check: func(h *hostileEnv, stdout string) {
			if strings.Contains(stdout, `"id":3`) {
				h.t.Errorf("the worker served a request after LLVM crashed: %s", stdout)
			}
		},
	},
	{
		name: "replay of a launch whose argument points into managed memory is refused before any GPU",
		setup: func(h *hostileEnv) ([]string, string) {
			inst := h.instance(h.Vecadd)
			args, err := inst.ArgBytes()
			h.must(err)
			y := binary.LittleEndian.Uint64(args[0])
			h.must(db.WriteManaged(h.DB, &db.ManagedList{Allocations: []db.ManagedAllocation{{Addr: db.FormatVAddr(y - 64), Size: 1 << 20}}}))
			return []string{"replay", "-rdb", "db", "--kernel", "_Z6vecaddPfPKfif", "-rid", inst.DynamicHash}, ""
		},
		code:   2,
		stderr: []string{"cannot be replayed", "argument 0", "points into the managed allocation", ".mneme-record.managed"},
	},
	{
		name: "replay of a kernel that reads a __managed__ variable is refused before any GPU",
		setup: func(h *hostileEnv) ([]string, string) {
			mod, err := llvm.ParseIR(`target triple = "nvptx64-nvidia-cuda"
@tally = addrspace(1) global i32 0
define ptx_kernel void @_Z6vecaddPfPKfif(ptr %y, ptr %x, i32 %n, float %a) {
  store i32 %n, ptr addrspace(1) @tally
  ret void
}
`, "managed.ll")
			h.must(err)
			h.write(filepath.Join(h.DB, h.Vecadd.Modules[0]), mod.Bitcode())
			mod.Dispose()
			h.must(db.WriteManaged(h.DB, &db.ManagedList{Variables: []db.ManagedVariable{{Name: "tally", Size: 4, Addr: "0x7e0000000000"}}}))
			return []string{"replay", "-rdb", "db", "--kernel", "_Z6vecaddPfPKfif", "-rid", h.instance(h.Vecadd).DynamicHash}, ""
		},
		code:   2,
		stderr: []string{"cannot be replayed", "kernel vecadd(float*", "__managed__ variable(s) tally (4 bytes at 0x7e0000000000)", ".mneme-record.managed"},
	},
	{
		name: "a managed list naming a variable with terminal escapes",
		setup: func(h *hostileEnv) ([]string, string) {
			h.write(filepath.Join(h.DB, db.ManagedFileName), []byte(`{"allocations":[],"variables":[{"name":"\u001b]0;owned\u0007","size":4}]}`))
			return []string{"replay", "-rdb", "db", "--kernel", "_Z6vecaddPfPKfif", "-rid", h.instance(h.Vecadd).DynamicHash}, ""
		},
		code:   2,
		stderr: []string{".mneme-record.managed", "variables[0].name"},
	},
	{
		name: "a --space file nesting parentheses a million deep",
		setup: func(h *hostileEnv) ([]string, string) {
			h.write(filepath.Join(h.Dir, "deep.yaml"), []byte("params: {x: {type: int, low: 1, high: 4}}\nderive: {block.x: \""+
				strings.Repeat("(", 1_000_000)+"x"+strings.Repeat(")", 1_000_000)+"\"}\n"))
			return []string{"tune", "-rdb", "db", "-rid", h.instance(h.Stencil).DynamicHash, "--space", "deep.yaml", "--output", "out", "--dry-run"}, ""
		},
		code:   2,
		stderr: []string{"deep.yaml", "derive.block.x", "the limit is 4096"},
	},
	{
		name: "a kernel file copied under another name",
		setup: func(h *hostileEnv) ([]string, string) {
			data, err := os.ReadFile(filepath.Join(h.DB, h.Vecadd.StaticHash+".json"))
			h.must(err)
			h.write(filepath.Join(h.DB, "copy.json"), data)
			return []string{"replay", "-rdb", "db", "-rid", h.Vecadd.StaticHash + "/" + h.instance(h.Vecadd).DynamicHash}, ""
		},
		code:   2,
		stderr: []string{"copy.json: StaticHash", "is not the file's name"},
	},
	{
		name: "escape sequences in a space file's names reach tune --dry-run escaped",
		setup: func(h *hostileEnv) ([]string, string) {
			h.write(filepath.Join(h.Dir, "esc.yaml"), []byte("name: \"sp\\e]0;owned\\a\\e[2J\"\nparams: {x: {type: categorical, values: [\"default<O2>\", \"default<O3>\"]}}\nderive: {passes: \"x\"}\n"))
			return []string{"tune", "-rdb", "db", "-rid", h.instance(h.Stencil).DynamicHash, "--space", "esc.yaml", "--output", "out", "--dry-run"}, ""
		},
		code:   0,
		stdout: []string{`\x1b]0;owned\x07\x1b[2J`},
		check: func(h *hostileEnv, stdout string) {
			if strings.ContainsAny(stdout, "\x1b\x07") {
				h.t.Errorf("control characters reached the terminal: %q", stdout)
			}
		},
	},
	{
		name: "a space whose pipeline choice LLVM does not parse is refused at load",
		setup: func(h *hostileEnv) ([]string, string) {
			h.write(filepath.Join(h.Dir, "pipes.yaml"), []byte("params: {opt: {type: pipeline, values: [\"default<O3>\", \"default<O3>,no-such-pass\"]}}\nderive: {passes: \"opt\"}\n"))
			return []string{"tune", "-rdb", "db", "-rid", h.instance(h.Stencil).DynamicHash, "--space", "pipes.yaml", "--output", "out", "--dry-run"}, ""
		},
		code:   2,
		stderr: []string{`parameter "opt": pipeline "default<O3>,no-such-pass"`, "no-such-pass"},
	},
	{
		name: "record --overwrite that records nothing keeps the old recording",
		setup: func(h *hostileEnv) ([]string, string) {
			// A runtime library that loads and records nothing.
			h.t.Setenv("MNEME_RT_LIB", filepath.Join(h.Outside, "precious"))
			return []string{"record", "--overwrite", "-rdb", "db", "--", "/bin/true"}, ""
		},
		code:   1,
		stderr: []string{"was left as it was"},
		check: func(h *hostileEnv, _ string) {
			if _, err := db.Open(h.DB); err != nil {
				h.t.Errorf("the old recording was lost: %v", err)
			}
		},
	},
}

// executableWithIR writes an ELF executable at path whose mneme_ir section
// holds the test database's kernels, as the mneme compilers build one.
// executableWithFatbin writes an executable carrying nvcc's fat binary of
// a vector add (nvbin's testdata), cut to its first cut bytes when cut > 0.
func (h *hostileEnv) executableWithFatbin(path string, cut int) {
	h.t.Helper()
	objcopy, err := exec.LookPath("objcopy")
	if err != nil {
		h.t.Skip("no objcopy: ", err)
	}
	fat, err := os.ReadFile("../../nvbin/testdata/small-ptx.nv_fatbin")
	h.must(err)
	if cut > 0 {
		fat = fat[:cut]
	}
	sec := filepath.Join(h.Dir, "fatbin-section")
	h.write(sec, fat)
	if out, err := exec.Command(objcopy, "--add-section", nvbin.FatbinSection+"="+sec, "/bin/true", path).CombinedOutput(); err != nil {
		h.t.Fatalf("objcopy: %v\n%s", err, out)
	}
}

func (h *hostileEnv) executableWithIR(path string) {
	h.t.Helper()
	objcopy, err := exec.LookPath("objcopy")
	if err != nil {
		h.t.Skip("no objcopy: ", err)
	}
	mod, err := llvm.ParseIR(hostileIR, "hostile.ll")
	h.must(err)
	sec := filepath.Join(h.Dir, "ir-section")
	h.write(sec, appabi.EncodeIREntry(appabi.IREntry{Name: "hostile.cu", Bitcode: mod.Bitcode()}))
	mod.Dispose()
	if out, err := exec.Command(objcopy, "--add-section", appabi.IRSection+"="+sec, "/bin/true", path).CombinedOutput(); err != nil {
		h.t.Fatalf("objcopy: %v\n%s", err, out)
	}
}

// resultsFolder makes out/ a results folder as a run leaves it (config.json,
// logs/) for the stencil instance.
func (h *hostileEnv) resultsFolder() string {
	out := filepath.Join(h.Dir, "out")
	// tune writes config.json itself on a run that stops at the missing
	// GPU, with the key options resume compares.
	code, _, stderr := h.run(h.tuneArgs(), "")
	if _, err := os.Stat(filepath.Join(out, "config.json")); err != nil {
		h.t.Fatalf("making a results folder: exit %d, %s", code, stderr)
	}
	return out
}

// tuneArgs is a tuning run of the stencil instance into out/.
func (h *hostileEnv) tuneArgs(extra ...string) []string {
	return append([]string{"tune", "-rdb", "db", "-rid", h.instance(h.Stencil).DynamicHash, "--preset", "quick", "--output", "out", "--compile-workers", "0"}, extra...)
}

// run starts mneme in h.Dir under the address-space limit, without a GPU.
func (h *hostileEnv) run(args []string, stdin string) (code int, stdout, stderr string) {
	exe, err := os.Executable()
	h.must(err)
	ctx, cancel := context.WithTimeout(context.Background(), hostileTimeout)
	defer cancel()
	shArgs := append([]string{"-c", fmt.Sprintf(`ulimit -v %d && exec "$0" "$@"`, addressSpaceLimitKiB), exe}, args...)
	cmd := exec.CommandContext(ctx, "sh", shArgs...)
	cmd.Dir = h.Dir
	cmd.Env = append(os.Environ(), envRunAsCLI+"=1", "CUDA_VISIBLE_DEVICES=")
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	if ctx.Err() != nil {
		h.t.Fatalf("mneme %s: still running after %v", strings.Join(args, " "), hostileTimeout)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out.String(), errb.String()
	}
	h.must(err)
	return 0, out.String(), errb.String()
}

// fingerprint is every file under dir by path: type, size and content hash.
func fingerprint(t *testing.T, dir string) map[string]string {
	t.Helper()
	fp := map[string]string{}
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		entry := info.Mode().String()
		if info.Mode().IsRegular() {
			data, _ := os.ReadFile(path)
			entry += fmt.Sprintf(" %d %x", len(data), sha256.Sum256(data))
		}
		fp[path] = entry
		return nil
	})
	return fp
}

func TestHostileInputs(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the crafted inputs (FIFOs, sparse files, ulimit -v) are Linux's")
	}
	for _, c := range hostileCases {
		t.Run(c.name, func(t *testing.T) {
			env := newHostileEnv(t)
			args, stdin := c.setup(env)
			before := fingerprint(t, env.Outside)
			start := time.Now()
			code, stdout, stderr := env.run(args, stdin)
			took := time.Since(start)
			if code != c.code {
				t.Errorf("mneme %s: exit %d, want %d\nstderr: %s", strings.Join(args, " "), code, c.code, stderr)
			}
			for _, want := range c.stderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr does not name %q:\n%s", want, stderr)
				}
			}
			if c.code == 2 && strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
				t.Errorf("want one line on stderr, got:\n%s", stderr)
			}
			for _, want := range c.stdout {
				if !strings.Contains(stdout, want) {
					t.Errorf("stdout does not hold %q:\n%.2000s", want, stdout)
				}
			}
			if args[0] == "worker" {
				for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
					if line != "" && !json.Valid([]byte(line)) {
						t.Errorf("worker answer is not JSON: %.200q", line)
					}
				}
			}
			if after := fingerprint(t, env.Outside); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Errorf("files outside the folder changed:\nbefore %v\nafter  %v", before, after)
			}
			if c.check != nil {
				c.check(env, stdout)
			}
			if took > 2*time.Second {
				t.Logf("took %v (want about a second at most)", took)
			}
		})
	}
}

// TestUsageErrorsExit2InEveryCommand walks every command (the compiler
// wrappers left out: their command line is the compiler's) and checks the
// exit-code contract on the command line itself: an unknown subcommand, a
// missing subcommand, an unknown flag, a flag without its value, a value of
// the wrong type and a missing argument all exit 2, with one line naming
// what was wrong, and before any GPU is looked for.
func TestUsageErrorsExit2InEveryCommand(t *testing.T) {
	env := &hostileEnv{t: t, Dir: t.TempDir()}
	// Commands that need no argument: they run with none.
	noArgs := map[string]bool{"mneme version": true, "mneme worker": true}
	expect := func(args []string, want string) {
		t.Helper()
		code, _, stderr := env.run(args, "")
		if code != exitUsage || !strings.Contains(stderr, want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("mneme %s: exit %d, want %d and one line naming %q\n%s", strings.Join(args, " "), code, exitUsage, want, stderr)
		}
	}
	var leaves, groups int
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		switch c.Name() {
		case "cc", "cxx", "help", "completion":
			return
		}
		if c.HasSubCommands() {
			groups++
			expect(append(slices.Clone(path), "frobnicate"), "frobnicate")
			expect(path, "name a command")
			for _, sub := range c.Commands() {
				walk(sub, append(slices.Clone(path), sub.Name()))
			}
			return
		}
		leaves++
		expect(append(slices.Clone(path), "--no-such-flag"), "no-such-flag")
		if !noArgs[c.CommandPath()] && len(path) > 0 {
			code, _, stderr := env.run(path, "")
			if code != exitUsage {
				t.Errorf("mneme %s with no argument: exit %d, want %d\n%s", strings.Join(path, " "), code, exitUsage, stderr)
			}
		}
		c.Flags().VisitAll(func(fl *pflag.Flag) {
			if fl.Name == "help" || fl.Hidden || fl.Deprecated != "" {
				return
			}
			if c.Name() == "tune" && fl.Name == "dump-config" {
				return // --dump-config=PATH is Mneme's spelling: not a bad value
			}
			switch fl.Value.Type() {
			case "int", "uint32", "uint", "int64", "float64":
				expect(append(slices.Clone(path), "--"+fl.Name+"=notanumber"), fl.Name)
			case "bool":
				expect(append(slices.Clone(path), "--"+fl.Name+"=maybe"), fl.Name)
			default:
				expect(append(slices.Clone(path), "--"+fl.Name), fl.Name)
			}
		})
	}
	walk(rootCmd, nil)
	if leaves < 10 || groups < 2 {
		t.Fatalf("found only %d commands and %d groups", leaves, groups)
	}
}

// FuzzDecodeConfigYAML feeds arbitrary --config files to the reader: it
// returns options or an error naming the file, and never panics.
func FuzzDecodeConfigYAML(f *testing.F) {
	f.Add([]byte("db: rec\ntrials: 10\nverify:\n  mode: ulp\n  ulp: 4\n"))
	f.Add([]byte("trials: 1\ntrials: 2\n"))
	f.Add([]byte("a: &x [*x]\n"))
	f.Add([]byte("seed: 1e400\nbogus: 1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, _, _, err := decodeConfigYAML("fuzz.yaml", data); err != nil && !strings.Contains(err.Error(), "fuzz.yaml") {
			t.Fatalf("error does not name the file: %v", err)
		}
	})
}

func TestDecodeConfigYAMLRefusesRepeatedKeys(t *testing.T) {
	if _, _, _, err := decodeConfigYAML("c.yaml", []byte("trials: 1\ntrials: 2\n")); err == nil || !strings.Contains(err.Error(), "trials") {
		t.Fatalf("repeated key: %v", err)
	}
}

// envSignalHelper makes TestSignalHelper act as a command that ignores its
// context and blocks (as one stuck in a system call would).
const envSignalHelper = "MNEME_TEST_SIGNAL_HELPER"

func TestSignalHelper(t *testing.T) {
	if os.Getenv(envSignalHelper) == "" {
		t.Skip("run by TestSignalsEndACommand")
	}
	signalGrace = time.Second
	ctx, stop := signalContext()
	defer stop()
	fmt.Println("ready")
	<-ctx.Done()
	fmt.Println("canceled")
	select {} // never stops by itself
}

// TestSignalsEndACommand: SIGTERM or SIGINT cancels a command's context, and
// a command that does not stop (blocked where the context does not reach)
// is ended after the grace period, or at once by a second signal, with
// 128+signal.
func TestSignalsEndACommand(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		signals []syscall.Signal
		code    int
		within  time.Duration
	}{
		{"SIGTERM, after the grace", []syscall.Signal{syscall.SIGTERM}, 143, 5 * time.Second},
		{"SIGINT, after the grace", []syscall.Signal{syscall.SIGINT}, 130, 5 * time.Second},
		{"SIGINT twice, at once", []syscall.Signal{syscall.SIGINT, syscall.SIGINT}, 130, 900 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(exe, "-test.run=^TestSignalHelper$")
			cmd.Env = append(os.Environ(), envSignalHelper+"=1")
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			buf := make([]byte, 6)
			if _, err := io.ReadFull(out, buf); err != nil || string(buf) != "ready\n" {
				t.Fatalf("the helper did not start: %q %v", buf, err)
			}
			start := time.Now()
			for _, s := range c.signals {
				cmd.Process.Signal(s)
				time.Sleep(50 * time.Millisecond)
			}
			done := make(chan error, 1)
			go func() { io.Copy(io.Discard, out); done <- cmd.Wait() }()
			select {
			case err := <-done:
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != c.code {
					t.Errorf("exit %v, want %d", err, c.code)
				}
				if took := time.Since(start); took > c.within {
					t.Errorf("ended after %v, want within %v", took, c.within)
				}
				if !strings.Contains(stderr.String(), "stopped without finishing") {
					t.Errorf("stderr: %q", stderr.String())
				}
			case <-time.After(15 * time.Second):
				t.Fatal("the signals did not end the command")
			}
		})
	}
}
