package tune

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/internal/safefile"
)

// SpaceShape reshapes a built-in preset with Mneme's space options
// (--launch-dim, --passes, --codegen-opt-range, --specialize-space, ...).
// Its keys are Mneme's config.yml keys; an empty field leaves the preset's
// parameter as it is. See SPACES.md, "Mneme's space options".
type SpaceShape struct {
	// LaunchDim is none (the recorded block), auto (the preset's block
	// parameters), x (block.x only) or xy/xyz (the preset's; z stays as
	// recorded).
	LaunchDim string `json:"launch_dim,omitempty" yaml:"launch_dim,omitempty"`
	// Passes are the pipelines to choose from (one: a fixed pipeline);
	// FixedPasses and PipelineFile (one pipeline a line, # comments) are
	// Mneme's other spellings of it.
	Passes       []string `json:"passes,omitempty" yaml:"passes,omitempty"`
	FixedPasses  string   `json:"fixed_passes,omitempty" yaml:"fixed_passes,omitempty"`
	PipelineFile string   `json:"pipeline_file,omitempty" yaml:"pipeline_file,omitempty"`
	// CodegenOptRange is "LO:HI[:STEP]" within 0..3; FixedCodegenOpt one level.
	CodegenOptRange string `json:"codegen_opt_range,omitempty" yaml:"codegen_opt_range,omitempty"`
	FixedCodegenOpt *int   `json:"fixed_codegen_opt,omitempty" yaml:"fixed_codegen_opt,omitempty"`
	// SpecializeSpace, SpecializeDimsSpace and LaunchBoundsSpace are fixed
	// (the baseline's value, off), on, off or on-off (searched).
	SpecializeSpace     string `json:"specialize_space,omitempty" yaml:"specialize_space,omitempty"`
	SpecializeDimsSpace string `json:"specialize_dims_space,omitempty" yaml:"specialize_dims_space,omitempty"`
	LaunchBoundsSpace   string `json:"launch_bounds_space,omitempty" yaml:"launch_bounds_space,omitempty"`
	// MaxThreadsPolicy is what max_threads is with launch bounds on:
	// block-threads (the block size, the default), recorded (the larger of
	// the recorded and the block size), hardware (the device limit) or
	// powers-of-two (searched over 32..1024, at least the block size).
	// MaxThreadsRange ("LO:HI[:STEP]") searches it over a range instead.
	MaxThreadsPolicy string `json:"max_threads_policy,omitempty" yaml:"max_threads_policy,omitempty"`
	MaxThreadsRange  string `json:"max_threads_range,omitempty" yaml:"max_threads_range,omitempty"`
	// MinBlocksPerSMRange ("LO:HI[:STEP]") replaces the preset's
	// min_blocks_per_sm choices.
	MinBlocksPerSMRange string `json:"min_blocks_per_sm_range,omitempty" yaml:"min_blocks_per_sm_range,omitempty"`
}

// Vocabularies of the shape options.
var (
	LaunchDimNames        = []string{"none", "auto", "x", "xy", "xyz"}
	BoolModeNames         = []string{"fixed", "on", "off", "on-off"}
	MaxThreadsPolicyNames = []string{"block-threads", "recorded", "hardware", "powers-of-two"}
)

// ParamMaxThreads is the parameter that searches max_threads under launch bounds.
const ParamMaxThreads = mneme.KeyMaxThreads

// maxRangeValues bounds a LO:HI:STEP range, so a typo cannot build a list of
// a billion values.
const maxRangeValues = 4096

// IsZero reports whether the shape leaves the preset as it is.
func (sh SpaceShape) IsZero() bool {
	return sh.LaunchDim == "" && len(sh.Passes) == 0 && sh.FixedPasses == "" && sh.PipelineFile == "" &&
		sh.CodegenOptRange == "" && sh.FixedCodegenOpt == nil && sh.SpecializeSpace == "" &&
		sh.SpecializeDimsSpace == "" && sh.LaunchBoundsSpace == "" && sh.MaxThreadsPolicy == "" &&
		sh.MaxThreadsRange == "" && sh.MinBlocksPerSMRange == ""
}

// Validate checks the shape's words and ranges without reading files; the
// errors name Mneme's flag.
func (sh SpaceShape) Validate() error {
	check := func(flag, v string, names []string) error {
		if v != "" && !slices.Contains(names, v) {
			return fmt.Errorf("--%s %q: want %s", flag, v, strings.Join(names, ", "))
		}
		return nil
	}
	for _, c := range []struct {
		flag, v string
		names   []string
	}{
		{"launch-dim", sh.LaunchDim, LaunchDimNames},
		{"specialize-space", sh.SpecializeSpace, BoolModeNames},
		{"specialize-dims-space", sh.SpecializeDimsSpace, BoolModeNames},
		{"launch-bounds-space", sh.LaunchBoundsSpace, BoolModeNames},
		{"max-threads-policy", sh.MaxThreadsPolicy, MaxThreadsPolicyNames},
	} {
		if err := check(c.flag, c.v, c.names); err != nil {
			return err
		}
	}
	given := 0
	for _, set := range []bool{len(sh.Passes) > 0, sh.FixedPasses != "", sh.PipelineFile != ""} {
		if set {
			given++
		}
	}
	if given > 1 {
		return fmt.Errorf("--passes, --fixed-passes and --pipeline-file exclude each other")
	}
	for _, p := range sh.Passes {
		if strings.TrimSpace(p) == "" {
			return fmt.Errorf("--passes: an empty pipeline")
		}
	}
	if sh.CodegenOptRange != "" && sh.FixedCodegenOpt != nil {
		return fmt.Errorf("--codegen-opt-range and --fixed-codegen-opt exclude each other")
	}
	if sh.FixedCodegenOpt != nil && (*sh.FixedCodegenOpt < 0 || *sh.FixedCodegenOpt > 3) {
		return fmt.Errorf("--fixed-codegen-opt %d: want 0..3", *sh.FixedCodegenOpt)
	}
	if _, err := ParseIntRange("codegen-opt-range", sh.CodegenOptRange, 0, 3); err != nil {
		return err
	}
	if _, err := ParseIntRange("max-threads-range", sh.MaxThreadsRange, 1, 1024); err != nil {
		return err
	}
	if _, err := ParseIntRange("min-blocks-per-sm-range", sh.MinBlocksPerSMRange, 0, 64); err != nil {
		return err
	}
	return nil
}

// IntRangeSpec is an inclusive integer range with a step.
type IntRangeSpec struct{ Low, High, Step int }

// ParseIntRange reads Mneme's "LO:HI", "LO:HI:STEP", "LO-HI" or "N" for
// --flag, within min..max; empty gives nil.
func ParseIntRange(flag, s string, min, max int) (*IntRangeSpec, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	sep := ":"
	if !strings.Contains(s, ":") {
		sep = "-"
	}
	parts := strings.Split(s, sep)
	var nums []int
	for _, p := range parts {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil {
			return nil, fmt.Errorf("--%s %q: want LO:HI or LO:HI:STEP of integers", flag, s)
		}
		nums = append(nums, n)
	}
	if len(nums) == 1 {
		nums = append(nums, nums[0])
	}
	if len(nums) > 3 {
		return nil, fmt.Errorf("--%s %q: want LO:HI or LO:HI:STEP", flag, s)
	}
	r := IntRangeSpec{Low: nums[0], High: nums[1], Step: 1}
	if len(nums) == 3 {
		r.Step = nums[2]
	}
	switch {
	case r.Step < 1:
		return nil, fmt.Errorf("--%s %q: the step must be at least 1", flag, s)
	case r.Low > r.High:
		return nil, fmt.Errorf("--%s %q: LO is above HI", flag, s)
	case r.Low < min || r.High > max:
		return nil, fmt.Errorf("--%s %q: want values within %d..%d", flag, s, min, max)
	case (r.High-r.Low)/r.Step+1 > maxRangeValues:
		return nil, fmt.Errorf("--%s %q: more than %d values", flag, s, maxRangeValues)
	}
	return &r, nil
}

// pipelines are the pipelines the shape names, nil when it names none. The
// pipeline file is read as a configuration: a regular file of bounded size.
func (sh SpaceShape) pipelines() ([]string, error) {
	switch {
	case len(sh.Passes) > 0:
		return sh.Passes, nil
	case sh.FixedPasses != "":
		return []string{sh.FixedPasses}, nil
	case sh.PipelineFile == "":
		return nil, nil
	}
	data, err := safefile.ReadFile(sh.PipelineFile, safefile.MaxConfig)
	if err != nil {
		return nil, fmt.Errorf("--pipeline-file: %w", err)
	}
	var out []string
	for _, ln := range strings.Split(string(data), "\n") {
		ln = strings.TrimSpace(ln)
		if ln != "" && !strings.HasPrefix(ln, "#") {
			out = append(out, ln)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--pipeline-file %s: no pipelines in it", sh.PipelineFile)
	}
	return out, nil
}

// setParam replaces the parameter called p.Name, or appends it.
func (s *Space) setParam(p Param) {
	for i := range s.Params {
		if s.Params[i].Name == p.Name {
			s.Params[i] = p
			return
		}
	}
	s.Params = append(s.Params, p)
}

// boolMode is the parameter a fixed|on|off|on-off mode makes.
func boolMode(name, mode string) Param {
	switch mode {
	case "on":
		return Fixed(name, true)
	case "on-off":
		return Bool(name)
	}
	return Fixed(name, false)
}

// applyShape reshapes a preset built for launch l. It runs before the
// derivation is attached, so the derivation sees the final parameters.
func (s *Space) applyShape(sh SpaceShape, l Launch, lim mneme.DeviceLimits) error {
	if err := sh.Validate(); err != nil {
		return err
	}
	switch sh.LaunchDim {
	case "none":
		s.Params = slices.DeleteFunc(s.Params, func(p Param) bool { return p.Name == ParamBlockX || p.Name == ParamBlockY })
		s.Constraints = slices.DeleteFunc(s.Constraints, func(c Constraint) bool { return strings.HasPrefix(c.Name, "block_x*block_y") })
	case "x":
		if _, ok := s.Param(ParamBlockY); ok {
			s.setParam(Fixed(ParamBlockY, int(normDim(l.Block).Y)))
		}
	}
	pipes, err := sh.pipelines()
	if err != nil {
		return err
	}
	if len(pipes) == 1 {
		s.setParam(Fixed(ParamPasses, pipes[0]))
	} else if len(pipes) > 1 {
		s.setParam(Pipeline(ParamPasses, pipes...))
	}
	if r, _ := ParseIntRange("codegen-opt-range", sh.CodegenOptRange, 0, 3); r != nil {
		s.setParam(IntRange(ParamCodegenOpt, r.Low, r.High, r.Step))
	} else if sh.FixedCodegenOpt != nil {
		s.setParam(Fixed(ParamCodegenOpt, *sh.FixedCodegenOpt))
	}
	if sh.SpecializeSpace != "" {
		s.setParam(boolMode(ParamSpecialize, sh.SpecializeSpace))
	}
	if sh.SpecializeDimsSpace != "" {
		s.setParam(boolMode(ParamSpecializeDims, sh.SpecializeDimsSpace))
	}
	if mode := sh.LaunchBoundsSpace; mode != "" {
		if _, ok := s.Param(ParamLaunchBounds); !ok && (mode == "on" || mode == "on-off") {
			s.addLaunchBounds(lim)
		}
		if _, ok := s.Param(ParamLaunchBounds); ok {
			s.setParam(boolMode(ParamLaunchBounds, mode))
		}
	}
	bounds, hasBounds := s.Param(ParamLaunchBounds)
	boundsPossible := hasBounds && !(bounds.Kind == KindFixed && bounds.Choices[0] == false)
	if r, _ := ParseIntRange("min-blocks-per-sm-range", sh.MinBlocksPerSMRange, 0, 64); r != nil && boundsPossible {
		// 0 stays a value: it is what a configuration without launch bounds takes.
		vals := []any{0}
		for v := r.Low; v <= r.High; v += r.Step {
			if v != 0 {
				vals = append(vals, v)
			}
		}
		s.setParam(Categorical(ParamMinBlocks, vals...))
	}
	var maxThreads []any
	if r, _ := ParseIntRange("max-threads-range", sh.MaxThreadsRange, 1, 1024); r != nil {
		for v := r.Low; v <= r.High; v += r.Step {
			maxThreads = append(maxThreads, v)
		}
	} else if sh.MaxThreadsPolicy == "powers-of-two" {
		for v := 32; v <= 1024; v *= 2 {
			maxThreads = append(maxThreads, v)
		}
	}
	if len(maxThreads) > 0 && boundsPossible {
		s.setParam(Categorical(ParamMaxThreads, maxThreads...))
		first := maxThreads[0].(int)
		s.Constraints = append(s.Constraints, Constraint{
			Name: fmt.Sprintf("max_threads >= threads per block with launch bounds, else %d", first),
			Check: func(pt Point) (bool, error) {
				mt := pt[ParamMaxThreads].(int)
				if on, _ := pt[ParamLaunchBounds].(bool); !on {
					return mt == first, nil
				}
				return mt >= blockThreads(pt, s.Baseline), nil
			},
		})
	}
	return nil
}

// shapeMaxThreads sets max_threads of a configuration with launch bounds by
// the shape's policy; a searched max_threads parameter wins.
func shapeMaxThreads(c *mneme.Config, pt Point, sh SpaceShape, l Launch, lim mneme.DeviceLimits) {
	if !c.SetLaunchBounds {
		return
	}
	if v, ok := pt[ParamMaxThreads].(int); ok {
		c.MaxThreads = v
		return
	}
	switch sh.MaxThreadsPolicy {
	case "recorded":
		c.MaxThreads = max(int(normDim(l.Block).Count()), int(c.Block.Count()))
	case "hardware":
		c.MaxThreads = min(lim.MaxThreadsPerBlock, 1024)
	}
}
