package main

import (
	"context"
	"errors"
	"strings"

	"github.com/spf13/pflag"

	"github.com/mneme-gpu/mneme/tune"
)

// instanceSelection is how a tune command line selects instances to tune
// across: --kernel NAME (every instance of that kernel) or -rid given more
// than once.
type instanceSelection struct {
	kernel string
	rids   []string
}

// active reports whether the command line tunes across instances rather
// than one instance as before.
func (s instanceSelection) active() bool { return s.kernel != "" || len(s.rids) > 1 }

// registerInstanceFlags adds --kernel to mneme tune's flags, so help lists
// it; extractInstanceFlags reads it before the flags are parsed.
func registerInstanceFlags(fl *pflag.FlagSet) {
	fl.String("kernel", "", "tune across every recorded instance of this kernel (mangled or demangled name, or static hash); -rid given several times selects instances instead")
}

// extractInstanceFlags takes --kernel and the -rid flags out of a tune
// command line when they select several instances: --kernel, or -rid more
// than once. Otherwise the command line is returned as it is, for the
// single-instance run. It stops at "--".
func extractInstanceFlags(args []string) ([]string, instanceSelection, error) {
	var sel instanceSelection
	var rest []string
	value := func(i *int, a, name string) (string, error) {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, nil
		}
		if *i+1 >= len(args) {
			return "", errors.New(strings.TrimLeft(name, "-") + ": needs a value")
		}
		*i++
		return args[*i], nil
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = append(rest, args[i:]...)
			break
		}
		var err error
		switch {
		case a == "--kernel" || strings.HasPrefix(a, "--kernel=") || a == "-kernel" || strings.HasPrefix(a, "-kernel="):
			name := "--kernel"
			if !strings.HasPrefix(a, "--") {
				name = "-kernel"
			}
			if sel.kernel, err = value(&i, a, name); err == nil && sel.kernel == "" {
				err = errors.New("--kernel: give a kernel name")
			}
		case a == "-rid" || strings.HasPrefix(a, "-rid=") || a == "--rid" || strings.HasPrefix(a, "--rid="):
			name := "-rid"
			if strings.HasPrefix(a, "--") {
				name = "--rid"
			}
			var id string
			if id, err = value(&i, a, name); err == nil {
				sel.rids = append(sel.rids, id)
			}
		default:
			rest = append(rest, a)
		}
		if err != nil {
			return args, sel, withExit(exitUsage, err)
		}
	}
	if !sel.active() {
		return args, instanceSelection{}, nil
	}
	if sel.kernel != "" && len(sel.rids) > 0 {
		return args, sel, withExit(exitUsage, errors.New("--kernel and -rid: give one (the kernel whose instances to tune, or the instances)"))
	}
	return rest, sel, nil
}

// runTuneInstances runs a tuning across the selected instances with the
// options of a single-instance run.
func runTuneInstances(ctx context.Context, ro tune.RunOptions, sel instanceSelection) error {
	return tune.RunInstances(ctx, tune.InstancesOptions{RunOptions: ro, Kernel: sel.kernel, Instances: sel.rids})
}
