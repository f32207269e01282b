package db

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"time"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/internal/safefile"
)

// LaunchStatsFileName is the launch statistics file of a database. It is
// JSON, but deliberately not named *.json: every *.json file of a database
// directory is a kernel file to Open and to Mneme's readers.
const LaunchStatsFileName = "LaunchStats.mnemestats"

// LaunchStatsVersion is the version of the launch statistics layout.
const LaunchStatsVersion = 1

// LaunchStats is what the shim counted over every kernel launch of a
// recorded run, whether or not the launch or its kernel was recorded: the
// launch shapes and their counts, which scalar arguments held, and the GPU
// time of each kernel and shape, timed with events on a sample of launches
// and scaled to all of them.
type LaunchStats struct {
	FormatVersion int `json:"FormatVersion"`
	// Complete is true when the application finished and the file holds
	// every launch; false in a file written periodically during the run
	// (the last one left behind by a run that died).
	Complete  bool   `json:"Complete"`
	WrittenAt string `json:"WrittenAt"` // RFC 3339
	// Launches counts every kernel launch the shim saw, of every kernel.
	Launches uint64 `json:"Launches"`
	// GPUTimeNs is the estimated GPU time of all launches (the sum of the
	// kernels' GPUTimeNs): what each kernel's TimeShare divides by.
	GPUTimeNs uint64 `json:"GPUTimeNs"`
	// Limits are the bounds the shim counted under.
	Limits StatsLimits `json:"Limits"`
	// Kernels, by GPUTimeNs, largest first; ties by KernelName.
	Kernels []KernelStats `json:"Kernels"`
}

// StatsLimits are the caps of the shim's tables and its timing sample.
type StatsLimits struct {
	MaxShapes    int `json:"MaxShapes"`    // shapes tracked per kernel
	MaxArgValues int `json:"MaxArgValues"` // distinct values tracked per argument
	MaxArgBytes  int `json:"MaxArgBytes"`  // larger arguments are not tracked
	// A shape's launches 2 to 1+TimedFirst are timed, then every
	// TimedEvery-th (the first launch of a kernel pays for loading its code).
	TimedFirst int `json:"TimedFirst"`
	TimedEvery int `json:"TimedEvery"`
}

// KernelStats are one kernel's launches over the run.
type KernelStats struct {
	KernelName    string `json:"KernelName"` // mangled
	DemangledName string `json:"DemangledName,omitempty"`
	// StaticHash names the kernel's file <StaticHash>.json when the kernel
	// was recorded; empty for a kernel that was not selected or whose
	// launches were all beyond the recording caps.
	StaticHash string `json:"StaticHash,omitempty"`
	Launches   uint64 `json:"Launches"`
	// TimedLaunches were timed with events; TimedNs is their summed time.
	TimedLaunches uint64 `json:"TimedLaunches"`
	TimedNs       uint64 `json:"TimedNs"`
	// GPUTimeNs estimates the time of all launches: each shape's mean timed
	// launch times its launches (its first launch's time for a shape with
	// no other launch timed, the kernel's mean for shapes never timed and
	// for OtherShapeLaunches).
	GPUTimeNs uint64 `json:"GPUTimeNs"`
	// TimeShare is GPUTimeNs over the run's GPUTimeNs, from 0 to 1.
	TimeShare float64 `json:"TimeShare"`
	// Shapes, by GPUTimeNs, largest first; at most Limits.MaxShapes.
	Shapes []ShapeStats `json:"Shapes"`
	// OtherShapeLaunches are launches whose shape did not fit the table.
	OtherShapeLaunches uint64 `json:"OtherShapeLaunches"`
	// EarlyLaunches were made while the runtime library loaded beside the
	// application for deployment: a counted run waits for it, a run
	// without counting runs the application's own code for them.
	EarlyLaunches uint64 `json:"EarlyLaunches,omitempty"`
	// Args, one per parameter in order; empty when the parameters were
	// never learnt (the kernel's first launch failed before they were).
	Args []ArgStats `json:"Args"`
}

// ShapeStats are the launches of one kernel with one launch shape.
type ShapeStats struct {
	GridDims      mneme.Dim3 `json:"GridDims"`
	BlockDims     mneme.Dim3 `json:"BlockDims"`
	SharedMem     uint32     `json:"SharedMem"` // dynamic shared memory bytes
	Launches      uint64     `json:"Launches"`
	TimedLaunches uint64     `json:"TimedLaunches"`
	TimedNs       uint64     `json:"TimedNs"`
	// FirstLaunchNs is the GPU time of the shape's first launch, timed
	// apart from the sample (it may pay for loading the kernel's code);
	// 0 when it was not timed. A shape launched once has only this.
	FirstLaunchNs uint64 `json:"FirstLaunchNs,omitempty"`
	GPUTimeNs     uint64 `json:"GPUTimeNs"`
	// KernelShare is GPUTimeNs over the kernel's, from 0 to 1.
	KernelShare float64 `json:"KernelShare"`
}

// ArgStats say how one parameter's value behaved over the kernel's
// launches.
type ArgStats struct {
	Index int    `json:"Index"`
	Size  uint64 `json:"Size"`
	// Tracked is false for a parameter larger than Limits.MaxArgBytes;
	// nothing else is known of it.
	Tracked bool `json:"Tracked"`
	// Invariant: every launch passed the same bytes.
	Invariant bool `json:"Invariant"`
	// Distinct counts the values seen, at most Limits.MaxArgValues; with
	// MoreValues it is a lower bound: more values came, and from then on
	// the argument was no longer watched (its Values' counts stop there).
	Distinct   int        `json:"Distinct"`
	MoreValues bool       `json:"MoreValues"`
	Values     []ArgValue `json:"Values"`
}

// ArgValue is one value a parameter took and how many launches passed it.
type ArgValue struct {
	Bytes    string `json:"Bytes"` // lowercase hex, Size bytes
	Launches uint64 `json:"Launches"`
}

// Shape is the launch shape of the statistics, for matching instances.
func (s *ShapeStats) Shape() (grid, block mneme.Dim3, shared uint32) {
	return s.GridDims, s.BlockDims, s.SharedMem
}

// Kernel finds the statistics of a kernel by mangled name and, when
// staticHash is not empty, by the static hash too (a kernel with a
// StaticHash recorded elsewhere matches only that one); nil when absent.
func (s *LaunchStats) Kernel(mangled, staticHash string) *KernelStats {
	var byName *KernelStats
	for i := range s.Kernels {
		k := &s.Kernels[i]
		if k.KernelName != mangled {
			continue
		}
		if staticHash != "" && k.StaticHash == staticHash {
			return k
		}
		if byName == nil && (k.StaticHash == "" || staticHash == "") {
			byName = k
		}
	}
	return byName
}

// ShapeOf finds the statistics of a launch shape; nil when it is not in
// the table.
func (k *KernelStats) ShapeOf(grid, block mneme.Dim3, shared uint32) *ShapeStats {
	for i := range k.Shapes {
		if s := &k.Shapes[i]; s.GridDims == grid && s.BlockDims == block && s.SharedMem == shared {
			return s
		}
	}
	return nil
}

// ForKernel finds the statistics of a recorded kernel; nil when absent.
func (s *LaunchStats) ForKernel(k *Kernel) *KernelStats { return s.Kernel(k.KernelName, k.StaticHash) }

// ForInstance finds the statistics of a recorded instance's launch shape:
// the launches it stands for; nil when its shape is not in the table.
func (k *KernelStats) ForInstance(inst *Instance) *ShapeStats {
	return k.ShapeOf(inst.GridDims, inst.BlockDims, inst.SharedMem)
}

// Name is the name to show a person: demangled when known.
func (k *KernelStats) Name() string {
	if k.DemangledName != "" {
		return k.DemangledName
	}
	return k.KernelName
}

// Finish derives what the counts imply: every shape's and kernel's
// GPUTimeNs, the shares, and the order of kernels and shapes. The writer
// calls it before writing; readers get files where it holds.
func (s *LaunchStats) Finish() {
	s.Launches, s.GPUTimeNs = 0, 0
	for i := range s.Kernels {
		k := &s.Kernels[i]
		k.finish()
		s.Launches += k.Launches
		s.GPUTimeNs += k.GPUTimeNs
	}
	for i := range s.Kernels {
		s.Kernels[i].TimeShare = share(s.Kernels[i].GPUTimeNs, s.GPUTimeNs)
	}
	sort.SliceStable(s.Kernels, func(i, j int) bool {
		a, b := &s.Kernels[i], &s.Kernels[j]
		if a.GPUTimeNs != b.GPUTimeNs {
			return a.GPUTimeNs > b.GPUTimeNs
		}
		if a.KernelName != b.KernelName {
			return a.KernelName < b.KernelName
		}
		return a.StaticHash < b.StaticHash
	})
}

func (k *KernelStats) finish() {
	k.Launches, k.TimedLaunches, k.TimedNs = k.OtherShapeLaunches, 0, 0
	for _, sh := range k.Shapes {
		k.Launches += sh.Launches
		k.TimedLaunches += sh.TimedLaunches
		k.TimedNs += sh.TimedNs
	}
	mean := k.MeanLaunchNs()
	total := estimate(k.OtherShapeLaunches, mean)
	for i := range k.Shapes {
		sh := &k.Shapes[i]
		m := mean
		if sh.TimedLaunches > 0 {
			m = float64(sh.TimedNs) / float64(sh.TimedLaunches)
		} else if sh.FirstLaunchNs > 0 {
			m = float64(sh.FirstLaunchNs)
		}
		sh.GPUTimeNs = estimate(sh.Launches, m)
		total += sh.GPUTimeNs
	}
	k.GPUTimeNs = total
	for i := range k.Shapes {
		k.Shapes[i].KernelShare = share(k.Shapes[i].GPUTimeNs, total)
	}
	sort.SliceStable(k.Shapes, func(i, j int) bool {
		a, b := &k.Shapes[i], &k.Shapes[j]
		if a.GPUTimeNs != b.GPUTimeNs {
			return a.GPUTimeNs > b.GPUTimeNs
		}
		return a.Launches > b.Launches
	})
}

// MeanLaunchNs is the kernel's mean timed launch: over its sampled
// launches, or, when none was sampled (a kernel launched once per shape),
// over its shapes' timed first launches; 0 when nothing was timed.
func (k *KernelStats) MeanLaunchNs() float64 {
	if k.TimedLaunches > 0 {
		return float64(k.TimedNs) / float64(k.TimedLaunches)
	}
	var sum float64
	n := 0
	for _, sh := range k.Shapes {
		if sh.FirstLaunchNs > 0 {
			sum += float64(sh.FirstLaunchNs)
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

func estimate(launches uint64, meanNs float64) uint64 {
	v := float64(launches) * meanNs
	if v >= math.MaxUint64 {
		return math.MaxUint64
	}
	return uint64(math.Round(v))
}

func share(part, whole uint64) float64 {
	if whole == 0 {
		return 0
	}
	return float64(part) / float64(whole)
}

// Validate checks what a reader relies on; WriteLaunchStats refuses stats
// that fail it and ReadLaunchStats reports the failure with the file name.
func (s *LaunchStats) Validate() error {
	if s.FormatVersion != LaunchStatsVersion {
		return fieldErr("FormatVersion", "%d is not supported (this mneme reads version %d)", s.FormatVersion, LaunchStatsVersion)
	}
	if s.WrittenAt != "" {
		if _, err := time.Parse(time.RFC3339Nano, s.WrittenAt); err != nil {
			return fieldErr("WrittenAt", "%q is not an RFC 3339 time", s.WrittenAt)
		}
	}
	l := s.Limits
	for _, f := range []struct {
		name string
		v    int
	}{{"MaxShapes", l.MaxShapes}, {"MaxArgValues", l.MaxArgValues}, {"MaxArgBytes", l.MaxArgBytes}, {"TimedEvery", l.TimedEvery}} {
		if f.v < 1 || f.v > 1<<20 {
			return fieldErr("Limits."+f.name, "%d: want 1 to %d", f.v, 1<<20)
		}
	}
	if l.TimedFirst < 0 || l.TimedFirst > 1<<20 {
		return fieldErr("Limits.TimedFirst", "%d: want 0 to %d", l.TimedFirst, 1<<20)
	}
	var launches, gpu uint64
	seen := make(map[[2]string]bool, len(s.Kernels))
	for i := range s.Kernels {
		k := &s.Kernels[i]
		where := fmt.Sprintf("Kernels[%d]", i)
		if err := k.validate(l); err != nil {
			var fe *fieldError
			if errors.As(err, &fe) {
				return fieldErr(where+"."+fe.field, "%s", fe.msg)
			}
			return fieldErr(where, "%v", err)
		}
		id := [2]string{k.KernelName, k.StaticHash}
		if seen[id] {
			return fieldErr(where+".KernelName", "%q (static hash %q) appears twice", k.KernelName, k.StaticHash)
		}
		seen[id] = true
		launches, gpu = addCapped(launches, k.Launches), addCapped(gpu, k.GPUTimeNs)
	}
	if launches != s.Launches {
		return fieldErr("Launches", "%d, but the kernels' launches sum to %d", s.Launches, launches)
	}
	if gpu != s.GPUTimeNs {
		return fieldErr("GPUTimeNs", "%d, but the kernels' GPU times sum to %d", s.GPUTimeNs, gpu)
	}
	return nil
}

// addCapped adds without wrapping, so a crafted file cannot make sums agree
// by overflow.
func addCapped(a, b uint64) uint64 {
	if a+b < a {
		return math.MaxUint64
	}
	return a + b
}

func validShare(v float64) bool { return v >= 0 && v <= 1 }

func (k *KernelStats) validate(l StatsLimits) error {
	if k.KernelName == "" {
		return fieldErr("KernelName", "empty")
	}
	if k.StaticHash != "" && !isHashLike(k.StaticHash) {
		return fieldErr("StaticHash", "%q: want a hash of letters, digits, '_' or '-'", k.StaticHash)
	}
	if len(k.Shapes) > l.MaxShapes {
		return fieldErr("Shapes", "%d shapes, more than Limits.MaxShapes (%d)", len(k.Shapes), l.MaxShapes)
	}
	if !validShare(k.TimeShare) {
		return fieldErr("TimeShare", "%v: want 0 to 1", k.TimeShare)
	}
	launches, timed, timedNs := k.OtherShapeLaunches, uint64(0), uint64(0)
	for i := range k.Shapes {
		sh := &k.Shapes[i]
		where := fmt.Sprintf("Shapes[%d]", i)
		for _, f := range []struct {
			name string
			d    mneme.Dim3
		}{{"GridDims", sh.GridDims}, {"BlockDims", sh.BlockDims}} {
			if f.d.X == 0 || f.d.Y == 0 || f.d.Z == 0 {
				return fieldErr(where+"."+f.name, "%s: every component must be at least 1", f.d)
			}
		}
		for j := range i {
			if o := &k.Shapes[j]; o.GridDims == sh.GridDims && o.BlockDims == sh.BlockDims && o.SharedMem == sh.SharedMem {
				return fieldErr(where, "the shape of Shapes[%d] again", j)
			}
		}
		if sh.Launches < 1 {
			return fieldErr(where+".Launches", "%d: a shape in the table was launched at least once", sh.Launches)
		}
		if sh.TimedLaunches > sh.Launches {
			return fieldErr(where+".TimedLaunches", "%d, more than its %d launches", sh.TimedLaunches, sh.Launches)
		}
		if !validShare(sh.KernelShare) {
			return fieldErr(where+".KernelShare", "%v: want 0 to 1", sh.KernelShare)
		}
		launches, timed, timedNs = addCapped(launches, sh.Launches), addCapped(timed, sh.TimedLaunches), addCapped(timedNs, sh.TimedNs)
	}
	if launches != k.Launches {
		return fieldErr("Launches", "%d, but its shapes and OtherShapeLaunches sum to %d", k.Launches, launches)
	}
	if timed != k.TimedLaunches {
		return fieldErr("TimedLaunches", "%d, but its shapes' sum to %d", k.TimedLaunches, timed)
	}
	if timedNs != k.TimedNs {
		return fieldErr("TimedNs", "%d, but its shapes' sum to %d", k.TimedNs, timedNs)
	}
	if k.EarlyLaunches > k.Launches {
		return fieldErr("EarlyLaunches", "%d, more than its %d launches", k.EarlyLaunches, k.Launches)
	}
	for i := range k.Args {
		if err := k.Args[i].validate(i, k.Launches, l); err != nil {
			var fe *fieldError
			if errors.As(err, &fe) {
				return fieldErr(fmt.Sprintf("Args[%d].%s", i, fe.field), "%s", fe.msg)
			}
			return err
		}
	}
	return nil
}

func (a *ArgStats) validate(i int, launches uint64, l StatsLimits) error {
	if a.Index != i {
		return fieldErr("Index", "%d, but it is parameter %d", a.Index, i)
	}
	if a.Size > 1<<16 {
		return fieldErr("Size", "%d bytes: a kernel parameter is at most 65536", a.Size)
	}
	if !a.Tracked {
		if a.Invariant || a.Distinct != 0 || a.MoreValues || len(a.Values) != 0 {
			return fieldErr("Tracked", "false, but the argument has values")
		}
		return nil
	}
	if a.Size > uint64(l.MaxArgBytes) {
		return fieldErr("Size", "%d bytes, more than Limits.MaxArgBytes (%d), yet tracked", a.Size, l.MaxArgBytes)
	}
	if a.Distinct != len(a.Values) {
		return fieldErr("Distinct", "%d, but %d values are listed", a.Distinct, len(a.Values))
	}
	if a.Distinct > l.MaxArgValues {
		return fieldErr("Distinct", "%d, more than Limits.MaxArgValues (%d)", a.Distinct, l.MaxArgValues)
	}
	if a.MoreValues && a.Distinct != l.MaxArgValues {
		return fieldErr("MoreValues", "true, but only %d of the %d values tracked are listed", a.Distinct, l.MaxArgValues)
	}
	if a.Invariant != (a.Distinct == 1 && !a.MoreValues) {
		return fieldErr("Invariant", "%v, but %d distinct values (more: %v)", a.Invariant, a.Distinct, a.MoreValues)
	}
	var sum uint64
	for j, v := range a.Values {
		b, err := hex.DecodeString(v.Bytes)
		if err != nil {
			return fieldErr(fmt.Sprintf("Values[%d].Bytes", j), "%q is not hex", v.Bytes)
		}
		if uint64(len(b)) != a.Size {
			return fieldErr(fmt.Sprintf("Values[%d].Bytes", j), "%d bytes, but Size is %d", len(b), a.Size)
		}
		for k := range j {
			if a.Values[k].Bytes == v.Bytes {
				return fieldErr(fmt.Sprintf("Values[%d].Bytes", j), "%q again (Values[%d])", v.Bytes, k)
			}
		}
		if v.Launches < 1 {
			return fieldErr(fmt.Sprintf("Values[%d].Launches", j), "%d: a listed value was passed at least once", v.Launches)
		}
		sum = addCapped(sum, v.Launches)
	}
	if sum > launches || (!a.MoreValues && sum != launches) {
		return fieldErr("Values", "their launches sum to %d, but the kernel has %d", sum, launches)
	}
	return nil
}

// requiredStatsKeys must be present at the top of a statistics file.
var requiredStatsKeys = []string{"FormatVersion", "Complete", "Launches", "GPUTimeNs", "Limits", "Kernels"}

// ParseLaunchStats decodes and validates a statistics file's contents;
// name is the file name used in errors.
func ParseLaunchStats(name string, data []byte) (*LaunchStats, error) {
	fail := func(err error) (*LaunchStats, error) { return nil, fmt.Errorf("%s: %w", name, err) }
	if _, err := decodeObject(data, requiredStatsKeys); err != nil {
		return fail(err)
	}
	var s LaunchStats
	if err := json.Unmarshal(data, &s); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fail(fieldErr(te.Field, "JSON %s cannot be read as %s", te.Value, te.Type))
		}
		return fail(jsonError(data, err))
	}
	if err := s.Validate(); err != nil {
		return fail(err)
	}
	return &s, nil
}

// ReadLaunchStats reads the statistics file of the database directory dir.
// A database recorded before statistics were kept has none: the error then
// wraps fs.ErrNotExist.
func ReadLaunchStats(dir string) (*LaunchStats, error) {
	data, err := safefile.ReadFileIn(dir, LaunchStatsFileName, safefile.MaxJSON)
	if err != nil {
		return nil, err
	}
	return ParseLaunchStats(filepath.Join(dir, LaunchStatsFileName), data)
}

// MarshalLaunchStats is the exact bytes WriteLaunchStats stores.
func MarshalLaunchStats(s *LaunchStats) ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("launch statistics: %w", err)
	}
	c := *s
	c.Kernels = make([]KernelStats, len(s.Kernels))
	for i, k := range s.Kernels {
		// A reader rejects null for a list.
		if k.Shapes == nil {
			k.Shapes = []ShapeStats{}
		}
		if k.Args == nil {
			k.Args = []ArgStats{}
		}
		args := make([]ArgStats, len(k.Args))
		for j, a := range k.Args {
			if a.Values == nil {
				a.Values = []ArgValue{}
			}
			args[j] = a
		}
		k.Args = args
		c.Kernels[i] = k
	}
	data, err := json.MarshalIndent(&c, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// WriteLaunchStats validates s and replaces the statistics file of dir
// without fsync (ReplaceFile): the recorder rewrites it periodically, and a
// reader sees the previous file or the new one whole.
func WriteLaunchStats(dir string, s *LaunchStats) error {
	data, err := MarshalLaunchStats(s)
	if err != nil {
		return err
	}
	return ReplaceFile(filepath.Join(dir, LaunchStatsFileName), data)
}
