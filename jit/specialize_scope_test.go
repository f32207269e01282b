package jit

import (
	"regexp"
	"strings"
	"testing"
)

// loadsParam reports whether ptx reads repeat_axpy's parameter i.
func loadsParam(ptx string, i int) bool {
	return regexp.MustCompile(`ld\.param\.\w+\s+%\w+, \[_Z11repeat_axpyiifPKfPf_param_` + string(rune('0'+i)) + `\]`).MatchString(ptx)
}

// TestSpecializeFoldsPointersOnlyWhenNamed: Specialize alone folds the
// scalar arguments and leaves pointers to be read at launch; naming a
// pointer in SpecializeArgs folds it too.
func TestSpecializeFoldsPointersOnlyWhenNamed(t *testing.T) {
	c := NewCompiler(Options{})
	cfg := baseConfig()
	cfg.Specialize = true
	all := compilePTX(t, c, cfg)
	if loadsParam(all, 1) || !loadsParam(all, 3) {
		t.Errorf("Specialize without SpecializeArgs: want the bound folded and the pointer read:\n%s", all)
	}
	cfg.SpecializeArgs = []int{3}
	named := compilePTX(t, c, cfg)
	if loadsParam(named, 3) || !loadsParam(named, 1) {
		t.Errorf("SpecializeArgs [3]: want only the pointer folded:\n%s", named)
	}
}

// TestSpecializeNeedsARecordedValue: specializing an argument the request
// has no value for is an error, not a crash.
func TestSpecializeNeedsARecordedValue(t *testing.T) {
	cfg := baseConfig()
	cfg.Specialize, cfg.SpecializeArgs = true, []int{1}
	_, err := NewCompiler(Options{}).Compile(&Request{IR: testIR(t), Kernel: repeatAxpy, Config: cfg, Args: recordedArgs()[:1]})
	if err == nil || !strings.Contains(err.Error(), "no recorded value") {
		t.Errorf("one recorded argument, specializing the second: %v", err)
	}
}
