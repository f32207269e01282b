// Package report holds what `mneme optimize` found about one application —
// the end-to-end times untuned and tuned, each kernel's share of the GPU
// time, its speedup predicted by replay and measured in the application, its
// tuning curve and what was refused and why — and renders it: report.json
// (the figures, read back by later runs and by the HTML renderer),
// report.html (one self-contained page with inline SVG figures) and a table
// for the terminal.
package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"

	"github.com/mneme-gpu/mneme/internal/safefile"
)

// Version is the report.json format this package writes; readers refuse
// newer ones.
const Version = 1

// MaxReportBytes bounds report.json: a report holds a few hundred kernels
// with a tuning curve each, far below it.
const MaxReportBytes = 64 << 20

// Kernel statuses in a report.
const (
	StatusKept     = "kept"      // tuned, and not slower in the application
	StatusDropped  = "dropped"   // tuned, but refused (Reason says why)
	StatusUntuned  = "untuned"   // below the share threshold or the budget
	StatusNoResult = "no-result" // tuning found nothing that verified and beat the baseline
)

// Report is one optimization of one application.
type Report struct {
	Version     int      `json:"version"`
	Application string   `json:"application"`
	Args        []string `json:"args,omitempty"`
	GPU         string   `json:"gpu,omitempty"`
	Driver      string   `json:"driver,omitempty"`
	Toolchain   string   `json:"toolchain,omitempty"`
	Created     string   `json:"created"`
	// Budget is the tuning budget given; TuningSeconds what tuning took.
	Budget        string   `json:"budget,omitempty"`
	TuningSeconds float64  `json:"tuning_seconds"`
	GPUs          []int    `json:"gpus,omitempty"`
	EndToEnd      EndToEnd `json:"end_to_end"`
	Kernels       []Kernel `json:"kernels"`
	// Notes are sentences for the reader: a budget too small, a stage that
	// failed, kernels whose results were reused.
	Notes []string `json:"notes,omitempty"`
}

// EndToEnd is the application's wall time over interleaved repeats.
type EndToEnd struct {
	UntunedSeconds []float64 `json:"untuned_seconds"`
	TunedSeconds   []float64 `json:"tuned_seconds"`
	// PredictedTunedSeconds is the untuned median less, for every kept
	// kernel, its in-application GPU time times (1 - 1/replay speedup), plus
	// DeployCostSeconds when a kernel is kept.
	PredictedTunedSeconds float64 `json:"predicted_tuned_seconds"`
	// DeployCostSeconds is what deploying was taken to cost the application
	// beyond its kernels' time (the runtime library loaded and unloaded);
	// 0 when not weighed.
	DeployCostSeconds float64 `json:"deploy_cost_seconds,omitempty"`
	OutputChecked     bool    `json:"output_checked"`
	OutputSame        bool    `json:"output_same"`
	// OutputFilter is the regular expression whose matching output lines
	// were left out of the comparison (--output-filter); "" when none.
	OutputFilter string `json:"output_filter,omitempty"`
	// OwnTimer is the expression that read the application's own timer
	// (--own-timer); UntunedOwn and TunedOwn its readings, in the
	// application's units (empty when a run printed none).
	OwnTimer   string    `json:"own_timer,omitempty"`
	UntunedOwn []float64 `json:"untuned_own,omitempty"`
	TunedOwn   []float64 `json:"tuned_own,omitempty"`
}

// Kernel is one kernel of the application.
type Kernel struct {
	Name      string `json:"name"`
	Demangled string `json:"demangled,omitempty"`
	IRHash    string `json:"ir_hash,omitempty"`
	// Share is the kernel's fraction of the application's GPU time; GPUSeconds
	// its GPU time in one untuned run; Launches its launch count.
	Share      float64 `json:"share"`
	GPUSeconds float64 `json:"gpu_seconds"`
	Launches   int64   `json:"launches"`
	Status     string  `json:"status"`
	Reason     string  `json:"reason,omitempty"`
	// FailedTrials names the configuration value the kernel's failed
	// trials share, when one does (tune.FailurePattern).
	FailedTrials string `json:"failed_trials,omitempty"`
	// Reused: the tuning result came from an earlier run (same IR hash, GPU,
	// driver and toolchain).
	Reused bool `json:"reused,omitempty"`
	// PredictedSpeedup is replay's (baseline / best); MeasuredSpeedup the
	// application's (untuned / tuned in-application time per launch); 0 when
	// not measured.
	PredictedSpeedup float64 `json:"predicted_speedup"`
	MeasuredSpeedup  float64 `json:"measured_speedup"`
	// InAppUntunedNS and InAppTunedNS are the kernel's mean time per launch
	// in each measured run.
	InAppUntunedNS []float64 `json:"in_app_untuned_ns,omitempty"`
	InAppTunedNS   []float64 `json:"in_app_tuned_ns,omitempty"`
	Classes        []Class   `json:"classes,omitempty"`
	Trials         []Trial   `json:"trials,omitempty"`
	BaselineNS     float64   `json:"baseline_ns,omitempty"`
}

// Class is the configuration chosen for one launch-shape class of a kernel.
type Class struct {
	Shape  string         `json:"shape"`
	Config map[string]any `json:"config"`
}

// Trial is one point of a tuning curve.
type Trial struct {
	Number int     `json:"number"`
	TimeNS float64 `json:"time_ns,omitempty"`
	Status string  `json:"status"`
	// Params are the trial's point in the search space.
	Params map[string]any `json:"params,omitempty"`
}

// Verified reports whether the trial ran and verified.
func (t Trial) Verified() bool { return t.Status == "verified" && t.TimeNS > 0 }

// Read loads and checks a report.json.
func Read(path string) (*Report, error) {
	data, err := safefile.ReadFile(path, MaxReportBytes)
	if err != nil {
		return nil, err
	}
	r, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// Parse decodes and checks a report.
func Parse(data []byte) (*Report, error) {
	var r Report
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("not a report: %w", err)
	}
	if err := r.Check(); err != nil {
		return nil, err
	}
	return &r, nil
}

// Check refuses a report whose figures cannot be drawn: an unknown version,
// negative or non-finite times, shares outside [0, 1].
func (r *Report) Check() error {
	if r.Version < 1 || r.Version > Version {
		return fmt.Errorf("field version: %d is not a report version this mneme reads (1..%d)", r.Version, Version)
	}
	for i, s := range append(append([]float64{}, r.EndToEnd.UntunedSeconds...), r.EndToEnd.TunedSeconds...) {
		if !finiteNonNegative(s) {
			return fmt.Errorf("field end_to_end: time %d is %v", i, s)
		}
	}
	if !finiteNonNegative(r.EndToEnd.PredictedTunedSeconds) {
		return errors.New("field end_to_end.predicted_tuned_seconds: not a time")
	}
	if !finiteNonNegative(r.EndToEnd.DeployCostSeconds) {
		return errors.New("field end_to_end.deploy_cost_seconds: not a time")
	}
	for _, k := range r.Kernels {
		if k.Name == "" {
			return errors.New("field kernels: a kernel without a name")
		}
		if !finiteNonNegative(k.Share) || k.Share > 1 {
			return fmt.Errorf("kernel %q: field share %v is not a fraction", k.Name, k.Share)
		}
		for _, v := range []float64{k.GPUSeconds, k.PredictedSpeedup, k.MeasuredSpeedup, k.BaselineNS} {
			if !finiteNonNegative(v) {
				return fmt.Errorf("kernel %q: a time or speedup is %v", k.Name, v)
			}
		}
		for _, t := range k.Trials {
			if !finiteNonNegative(t.TimeNS) {
				return fmt.Errorf("kernel %q: trial %d time %v", k.Name, t.Number, t.TimeNS)
			}
		}
	}
	return nil
}

func finiteNonNegative(v float64) bool { return v >= 0 && !math.IsInf(v, 0) && !math.IsNaN(v) }

// FileJSON and FileHTML are the report's names in an output folder.
const (
	FileJSON = "report.json"
	FileHTML = "report.html"
)

// Write stores the report as indented JSON in dir/report.json.
func (r *Report) Write(dir string) error {
	r.Version = Version
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return WriteIn(dir, FileJSON, append(data, '\n'))
}

// WriteIn replaces dir/name with data: written beside it and renamed over
// it, so a reader sees the old file or the new one, and never through a link.
func WriteIn(dir, name string, data []byte) error {
	tmp := "." + name + ".tmp"
	f, err := safefile.CreateIn(dir, tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(filepath.Join(dir, tmp))
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(filepath.Join(dir, tmp), filepath.Join(dir, name))
}

// Median of xs (0 for none).
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Speedup is the end-to-end speedup by median wall time (0 when unmeasured).
func (e EndToEnd) Speedup() float64 {
	u, t := Median(e.UntunedSeconds), Median(e.TunedSeconds)
	if u <= 0 || t <= 0 {
		return 0
	}
	return u / t
}

// PredictTuned applies Amdahl's law to the untuned median: each kernel that
// is kept saves its GPU time times (1 - 1/speedup), by replay's prediction;
// deploying anything costs deployCost seconds.
func PredictTuned(untunedSeconds float64, kernels []Kernel, deployCost float64) float64 {
	saved, kept := 0.0, false
	for _, k := range kernels {
		if k.Status == StatusKept && k.PredictedSpeedup > 0 {
			saved += k.GPUSeconds * (1 - 1/k.PredictedSpeedup)
			kept = true
		}
	}
	if kept {
		saved -= deployCost
	}
	return math.Max(0, untunedSeconds-saved)
}

// SortByShare orders kernels by their share of the GPU time, largest first
// (by name among equals, so reports compare).
func SortByShare(ks []Kernel) {
	sort.SliceStable(ks, func(i, j int) bool {
		if ks[i].Share != ks[j].Share {
			return ks[i].Share > ks[j].Share
		}
		return ks[i].Name < ks[j].Name
	})
}
