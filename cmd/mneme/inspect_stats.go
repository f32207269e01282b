package main

import (
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/db"
)

// inspectStats is the launch statistics part of `inspect --json`: every
// kernel of the run, recorded or not, by its share of the GPU time.
type inspectStats struct {
	File      string               `json:"file"`
	Complete  bool                 `json:"complete"` // the application finished
	WrittenAt string               `json:"written_at,omitempty"`
	Launches  uint64               `json:"launches"`
	GPUTimeNs uint64               `json:"gpu_time_ns"`
	Kernels   []inspectStatsKernel `json:"kernels"`
}

type inspectStatsKernel struct {
	KernelName         string  `json:"kernel_name"`
	DemangledName      string  `json:"demangled_name,omitempty"`
	StaticHash         string  `json:"static_hash,omitempty"` // set when the kernel was recorded
	Launches           uint64  `json:"launches"`
	TimedLaunches      uint64  `json:"timed_launches"`
	GPUTimeNs          uint64  `json:"gpu_time_ns"`
	TimeShare          float64 `json:"time_share"` // of the run's GPU time
	RecordedShare      float64 `json:"recorded_share"`
	OtherShapeLaunches uint64  `json:"other_shape_launches"`
	// EarlyLaunches were made while the runtime library loaded for
	// deployment (a measured run's statistics).
	EarlyLaunches uint64              `json:"early_launches,omitempty"`
	Shapes        []inspectStatsShape `json:"shapes"`
	Args          []inspectStatsArg   `json:"args"`
}

type inspectStatsShape struct {
	Grid          mneme.Dim3 `json:"grid"`
	Block         mneme.Dim3 `json:"block"`
	SharedMem     uint32     `json:"shared_mem"`
	Launches      uint64     `json:"launches"`
	TimedLaunches uint64     `json:"timed_launches"`
	MeanNs        uint64     `json:"mean_ns"` // of the timed launches; 0 when none was timed
	// FirstLaunchNs is the first launch's time, timed apart; 0: not timed.
	FirstLaunchNs uint64   `json:"first_launch_ns,omitempty"`
	GPUTimeNs     uint64   `json:"gpu_time_ns"`
	KernelShare   float64  `json:"kernel_share"`
	Instances     []string `json:"instances"` // recorded instances of this shape
}

type inspectStatsArg struct {
	Index      int                    `json:"index"`
	Name       string                 `json:"name,omitempty"`
	Kind       string                 `json:"kind,omitempty"`
	Size       uint64                 `json:"size"`
	Tracked    bool                   `json:"tracked"`
	Invariant  bool                   `json:"invariant"`
	Distinct   int                    `json:"distinct"`
	MoreValues bool                   `json:"more_values"`
	Values     []inspectStatsArgValue `json:"values"`
}

type inspectStatsArgValue struct {
	Hex      string `json:"hex"`
	Value    string `json:"value"`
	Launches uint64 `json:"launches"`
}

// describeStats joins the statistics to the recorded kernels: argument
// names and kinds, and the instances recorded for each shape. d may be nil
// (a run whose kernels were none of them recorded).
func describeStats(s *db.LaunchStats, d *db.DB, path string, short map[string]string) *inspectStats {
	out := &inspectStats{File: path, Complete: s.Complete, WrittenAt: s.WrittenAt, Launches: s.Launches, GPUTimeNs: s.GPUTimeNs, Kernels: []inspectStatsKernel{}}
	recorded := map[string]*db.Kernel{}
	if d != nil {
		for _, k := range d.Kernels {
			recorded[k.StaticHash] = k
		}
	}
	for _, k := range s.Kernels {
		ik := inspectStatsKernel{
			KernelName: k.KernelName, DemangledName: k.DemangledName, StaticHash: k.StaticHash,
			Launches: k.Launches, TimedLaunches: k.TimedLaunches, GPUTimeNs: k.GPUTimeNs, TimeShare: k.TimeShare, EarlyLaunches: k.EarlyLaunches,
			OtherShapeLaunches: k.OtherShapeLaunches, Shapes: []inspectStatsShape{}, Args: []inspectStatsArg{},
		}
		rk := recorded[k.StaticHash]
		if k.StaticHash == "" {
			rk = nil
		}
		for _, sh := range k.Shapes {
			is := inspectStatsShape{Grid: sh.GridDims, Block: sh.BlockDims, SharedMem: sh.SharedMem, Launches: sh.Launches,
				TimedLaunches: sh.TimedLaunches, GPUTimeNs: sh.GPUTimeNs, KernelShare: sh.KernelShare, Instances: []string{}}
			if sh.TimedLaunches > 0 {
				is.MeanNs = sh.TimedNs / sh.TimedLaunches
			}
			is.FirstLaunchNs = sh.FirstLaunchNs
			if rk != nil {
				for _, id := range rk.InstanceIDs() {
					inst := rk.Instances[id]
					if inst.GridDims == sh.GridDims && inst.BlockDims == sh.BlockDims && inst.SharedMem == sh.SharedMem {
						is.Instances = append(is.Instances, short[db.InstanceRef{Kernel: rk, Instance: inst}.ID()])
					}
				}
			}
			if len(is.Instances) > 0 {
				ik.RecordedShare += sh.KernelShare
			}
			ik.Shapes = append(ik.Shapes, is)
		}
		for _, a := range k.Args {
			ia := inspectStatsArg{Index: a.Index, Size: a.Size, Tracked: a.Tracked, Invariant: a.Invariant, Distinct: a.Distinct,
				MoreValues: a.MoreValues, Values: []inspectStatsArgValue{}}
			var kind mneme.ArgKind
			if rk != nil && a.Index < len(rk.ArgKinds) && rk.ArgSizes[a.Index] == a.Size {
				ia.Name, kind = rk.ArgNames[a.Index], rk.ArgKinds[a.Index]
				ia.Kind = kind.String()
			}
			for _, v := range a.Values {
				b, _ := hex.DecodeString(v.Bytes) // validated when read
				value := v.Bytes
				if kind != "" {
					value = kind.Format(b)
				}
				ia.Values = append(ia.Values, inspectStatsArgValue{Hex: v.Bytes, Value: value, Launches: v.Launches})
			}
			ik.Args = append(ik.Args, ia)
		}
		out.Kernels = append(out.Kernels, ik)
	}
	return out
}

// formatNs is a duration for a person: ns, us, ms or s.
func formatNs(ns uint64) string {
	d := time.Duration(min(ns, 1<<63-1))
	switch {
	case d < time.Microsecond:
		return fmt.Sprintf("%d ns", ns)
	case d < time.Millisecond:
		return fmt.Sprintf("%.1f us", float64(ns)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.2f ms", float64(ns)/1e6)
	}
	return fmt.Sprintf("%.2f s", float64(ns)/1e9)
}

func percent(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }

// argSummary says in a few words how a parameter behaved.
func argSummary(a inspectStatsArg) string {
	label := a.Name
	if label == "" {
		label = fmt.Sprintf("arg%d", a.Index)
	}
	switch {
	case !a.Tracked:
		return label + " not tracked"
	case a.Invariant:
		return label + "=" + a.Values[0].Value
	case a.MoreValues:
		return fmt.Sprintf("%s: >%d values", label, a.Distinct)
	}
	vals := make([]string, len(a.Values))
	for i, v := range a.Values {
		vals[i] = v.Value
	}
	return fmt.Sprintf("%s: %d values (%s)", label, a.Distinct, strings.Join(vals, ","))
}

// printStatsTable prints the statistics: a line per kernel by time share,
// then its shapes and how each argument behaved.
func printStatsTable(w io.Writer, s *inspectStats) error {
	state := "complete"
	if !s.Complete {
		state = "incomplete: the run did not finish"
	}
	fmt.Fprintf(w, "\nlaunch statistics (%s): %d launches of %d kernels, %s of GPU time\n", state, s.Launches, len(s.Kernels), formatNs(s.GPUTimeNs))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KERNEL\tSHARE\tGPU TIME\tLAUNCHES\tTIMED\tSHAPES\tRECORDED\tARGS")
	for _, k := range s.Kernels {
		name := k.DemangledName
		if name == "" {
			name = k.KernelName
		}
		shapes := fmt.Sprint(len(k.Shapes))
		if k.OtherShapeLaunches > 0 {
			shapes += fmt.Sprintf(" (+%d launches of others)", k.OtherShapeLaunches)
		}
		rec := "no"
		if k.StaticHash != "" {
			rec = percent(k.RecordedShare) + " of its time"
		}
		args := make([]string, len(k.Args))
		for i, a := range k.Args {
			args[i] = argSummary(a)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", cell(name), percent(k.TimeShare), formatNs(k.GPUTimeNs), k.Launches, k.TimedLaunches,
			cell(shapes), rec, cell(strings.Join(args, "; ")))
		for _, sh := range k.Shapes {
			inst := "-"
			if len(sh.Instances) > 0 {
				inst = strings.Join(sh.Instances, ",")
			}
			mean := "untimed"
			if sh.TimedLaunches > 0 {
				mean = formatNs(sh.MeanNs) + " each"
			} else if sh.FirstLaunchNs > 0 {
				mean = formatNs(sh.FirstLaunchNs) + " (first launch)"
			}
			fmt.Fprintf(tw, "  grid %s block %s shmem %d\t%s\t%s\t%d\t%d\t%s\t%s\n", sh.Grid, sh.Block, sh.SharedMem, percent(sh.KernelShare),
				formatNs(sh.GPUTimeNs), sh.Launches, sh.TimedLaunches, mean, cell(inst))
		}
	}
	return tw.Flush()
}
