package tune

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/deploy"
	"github.com/mneme-gpu/mneme/internal/jsonfield"
	"github.com/mneme-gpu/mneme/internal/safefile"
)

// ProteusKernel is one entry of Proteus's PROTEUS_TUNED_KERNELS file,
// defined in deploy, whose runtime reads it.
type ProteusKernel = deploy.ProteusKernel

var optLevelRE = regexp.MustCompile(`^default<O([0-3sz])>$`)

// ProteusEntry converts a configuration to Proteus's schema. Proteus's
// OptLevel is the level of the default pipeline; a custom pipeline keeps "3"
// and travels in Pipeline. TunedMaxThreads is -1 without launch bounds, as
// Proteus's default.
func ProteusEntry(c mneme.Config) ProteusKernel {
	p := ProteusKernel{Pipeline: c.Passes, CodeGen: "serial", SpecializeArgs: c.Specialize,
		LaunchBounds: c.SetLaunchBounds, SpecializeDims: c.SpecializeDims, SpecializeDimsRange: c.SpecializeDims,
		OptLevel: "3", CodeGenOptLevel: c.CodegenOpt, TunedMaxThreads: -1, MinBlocksPerSM: c.MinBlocksPerSM}
	if m := optLevelRE.FindStringSubmatch(c.Passes); m != nil {
		p.OptLevel = m[1]
	}
	if c.SetLaunchBounds {
		p.TunedMaxThreads = c.MaxThreads
	}
	return p
}

// writeProteus adds the kernel's entry to the results directory's Proteus
// file and to --proteus-output, unless --no-proteus-output.
func (s *Study) writeProteus(kernel string, e ProteusKernel) error {
	if s.Opts.NoProteusOutput {
		return nil
	}
	if err := s.Results.MergeJSONMap(ProteusFile, kernel, e); err != nil {
		return err
	}
	if s.Opts.ProteusOutput == "" {
		return nil
	}
	abs, err := filepath.Abs(s.Opts.ProteusOutput)
	if err != nil {
		return fmt.Errorf("--proteus-output %s: %w", s.Opts.ProteusOutput, err)
	}
	// The file's own folder bounds it: a link named like the file is
	// replaced, never written through.
	out := &Results{Dir: filepath.Dir(abs)}
	if err := out.MergeJSONMap(filepath.Base(abs), kernel, e); err != nil {
		return fmt.Errorf("--proteus-output: %w", err)
	}
	return nil
}

// TunedKernel is one entry of mneme_tuned_kernels.json, defined in deploy,
// whose runtime reads it.
type TunedKernel = deploy.TunedKernel

// MergeJSONMap reads name (a JSON object keyed by kernel) if present, sets
// key to v, and writes it back atomically, so several kernels tuned into the
// same directory accumulate.
func (r *Results) MergeJSONMap(name, key string, v any) error {
	m := map[string]json.RawMessage{}
	data, err := safefile.ReadFileIn(r.Dir, name, safefile.MaxJSON)
	switch {
	case err == nil:
		if err := jsonfield.Check(data); err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(r.Dir, name), err)
		}
		if err := json.Unmarshal(data, &m); err != nil {
			return fmt.Errorf("%s: %v", filepath.Join(r.Dir, name), err)
		}
		if m == nil {
			return fmt.Errorf("%s: not a JSON object keyed by kernel", filepath.Join(r.Dir, name))
		}
		for k, v := range m {
			if t := bytes.TrimSpace(v); len(t) == 0 || t[0] != '{' {
				return fmt.Errorf("%s: %q: want an object (one kernel's entry)", filepath.Join(r.Dir, name), k)
			}
		}
	case !errors.Is(err, os.ErrNotExist):
		return err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	m[key] = b
	return r.WriteJSON(name, m)
}
