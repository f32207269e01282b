package tune

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
)

// A kernel recorded as machine code only tunes its block shape and nothing
// that needs IR; the same preset for a kernel with IR keeps those knobs.
func TestMachineCodePresetsKeepOnlyTheLaunch(t *testing.T) {
	withIR := vecadd
	machine := vecadd
	machine.MachineCode = true
	s, err := Preset("launch", withIR, mneme.DeviceLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Param(ParamLaunchBounds); !ok {
		t.Fatal("the launch preset of a kernel with IR has no launch bounds")
	}
	for _, name := range []string{"quick", "standard", "launch", "full"} {
		s, err := Preset(name, machine, mneme.DeviceLimits{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, ok := s.Param(ParamBlockX); !ok {
			t.Errorf("%s: no block shapes for a machine-code kernel", name)
		}
		for _, p := range []string{ParamLaunchBounds, ParamPasses, ParamSpecialize, ParamSpecializeDims, ParamCodegenOpt} {
			if _, ok := s.Param(p); ok {
				t.Errorf("%s: %s offered for a kernel without IR", name, p)
			}
		}
	}
	if _, err := Preset("compiler", machine, mneme.DeviceLimits{}); err == nil || !strings.Contains(err.Error(), "--preset launch") {
		t.Errorf("compiler preset for machine code: %v", err)
	}
}

// Its launch safety is aggressive with verification, whatever was asked,
// and the run says why.
func TestMachineCodeKernelSearchesBlocksAggressively(t *testing.T) {
	dbDir, id := writeRunDB(t, func(dir string, k *db.Kernel) {
		k.Code, k.Modules = db.CodeMachine, []string{}
		k.DeviceCode = db.DeviceCodeFileName([]byte("cubin"))
		if err := os.WriteFile(filepath.Join(dir, k.DeviceCode), []byte("cubin"), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	ro, stdout, _ := runOptions(t)
	ro.Options.DB, ro.Options.Instance, ro.Options.Preset = dbDir, id, "launch"
	ro.Factory, ro.DryRun = nil, true
	if err := Run(context.Background(), ro); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"launch safety aggressive", "machine code only"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("dry run lacks %q:\n%s", want, stdout)
		}
	}
}
