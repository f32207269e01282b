package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme"
)

// fakeMneme writes a script standing in for `mneme deploy compile-variant`:
// it keeps its arguments and request, and answers with body on stdout,
// errText on stderr and exit status rc.
func fakeMneme(t *testing.T, body, errText string, rc int) (bin, argsFile, reqFile string) {
	t.Helper()
	dir := t.TempDir()
	argsFile, reqFile = filepath.Join(dir, "args"), filepath.Join(dir, "req")
	bin = filepath.Join(dir, "mneme")
	script := "#!/bin/sh\necho \"$@\" > " + argsFile + "\ncat > " + reqFile + "\nprintf '%s' '" + body + "'\nprintf '%s' '" + errText + "' >&2\nexit " + string(rune('0'+rc)) + "\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, argsFile, reqFile
}

func TestCommandCompiler(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	bin, argsFile, reqFile := fakeMneme(t, `{"cubin":"AQI=","scalars":[1],"arg_sizes":[8,4],"registers":12}`, "", 0)
	c := &CommandCompiler{Bin: bin, Executable: "/app", Device: 3}
	resp, err := c.Compile("_Z1kPfi", mneme.Config{Passes: "default<O2>"}, [][]byte{{1}, {2}})
	if err != nil {
		t.Fatal(err)
	}
	if string(resp.Cubin) != "\x01\x02" || resp.Registers != 12 || len(resp.ArgSizes) != 2 {
		t.Errorf("response %+v", resp)
	}
	args, _ := os.ReadFile(argsFile)
	if strings.TrimSpace(string(args)) != "deploy compile-variant --device 3" {
		t.Errorf("arguments %q", args)
	}
	req, _ := os.ReadFile(reqFile)
	for _, want := range []string{`"executable":"/app"`, `"kernel":"_Z1kPfi"`, `"passes":"default\u003cO2\u003e"`, `"args":["AQ==","Ag=="]`} {
		if !strings.Contains(string(req), want) {
			t.Errorf("request %s lacks %s", req, want)
		}
	}

	bin, _, _ = fakeMneme(t, "", "error: unknown pass no-such-pass", 5)
	_, err = (&CommandCompiler{Bin: bin}).Compile("k", mneme.Config{}, nil)
	if err == nil || !strings.Contains(err.Error(), "unknown pass no-such-pass") || !strings.Contains(err.Error(), bin) {
		t.Errorf("a failing compiler: %v, want its standard error and name", err)
	}
	bin, _, _ = fakeMneme(t, "not json", "", 0)
	if _, err = (&CommandCompiler{Bin: bin}).Compile("k", mneme.Config{}, nil); err == nil || !strings.Contains(err.Error(), "unreadable answer") {
		t.Errorf("an unreadable answer: %v", err)
	}
}

func TestMnemeBinary(t *testing.T) {
	prefix := t.TempDir()
	lib := filepath.Join(prefix, "lib", "libmneme_rt.so")
	t.Setenv(MnemeBinEnv, "")
	if got := MnemeBinary(lib); got != "mneme" {
		t.Errorf("no mneme in the prefix: %q, want mneme on PATH", got)
	}
	bin := filepath.Join(prefix, "bin", "mneme")
	os.MkdirAll(filepath.Dir(bin), 0o755)
	os.WriteFile(bin, nil, 0o755)
	if got := MnemeBinary(lib); got != bin {
		t.Errorf("mneme in the prefix: %q, want %q", got, bin)
	}
	t.Setenv(MnemeBinEnv, "/opt/mneme")
	if got := MnemeBinary(lib); got != "/opt/mneme" {
		t.Errorf("with %s set: %q", MnemeBinEnv, got)
	}
}
