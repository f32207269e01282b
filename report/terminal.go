package report

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteSummary prints the report's end-to-end figures and a line per kernel
// for a terminal. Names come from the application's binary: the caller
// escapes what reaches a terminal (see cmd/mneme's termSafe).
func WriteSummary(w io.Writer, r *Report, escape func(string) string) {
	e := r.EndToEnd
	fmt.Fprintf(w, "end to end: %s untuned, %s tuned (median of %d and %d runs): %s; predicted from replay %.3f s\n",
		fmtNS(1e9*Median(e.UntunedSeconds)), fmtNS(1e9*Median(e.TunedSeconds)), len(e.UntunedSeconds), len(e.TunedSeconds),
		speedupText(e.Speedup()), e.PredictedTunedSeconds)
	if len(e.UntunedOwn) > 0 && len(e.TunedOwn) > 0 {
		u, t := Median(e.UntunedOwn), Median(e.TunedOwn)
		fmt.Fprintf(w, "by its own timer: %.4g untuned, %.4g tuned (median, in its units): %s\n", u, t, speedupText(u/t))
	}
	ks := append([]Kernel(nil), r.Kernels...)
	SortByShare(ks)
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "KERNEL\tSHARE\tLAUNCHES\tSTATUS\tREPLAY\tIN APP\tWHY")
	for _, k := range ks {
		name := shortName(k)
		if k.Reused {
			name += " (reused)"
		}
		fmt.Fprintf(tw, "%s\t%.1f%%\t%d\t%s\t%s\t%s\t%s\n", escape(name), 100*k.Share, k.Launches, k.Status,
			speedupText(k.PredictedSpeedup), speedupText(k.MeasuredSpeedup), escape(k.Reason))
	}
	tw.Flush()
	for _, n := range r.Notes {
		fmt.Fprintln(w, escape(n))
	}
}
