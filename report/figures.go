package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Figures are drawn with gonum/plot into SVG and inlined into the page, so
// report.html needs no network and no script to show them.

// maxLegendKernels bounds the kernels drawn one by one in the Amdahl chart;
// the rest are summed into "other kernels".
const maxLegendKernels = 8

// svgOf renders p at w×h and returns the bare <svg> element.
func svgOf(p *plot.Plot, w, h vg.Length) (string, error) {
	wt, err := p.WriterTo(w, h, "svg")
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if _, err := wt.WriteTo(&buf); err != nil {
		return "", err
	}
	s := buf.String()
	if i := strings.Index(s, "<svg"); i >= 0 {
		s = s[i:]
	}
	return s, nil
}

// shortName is a kernel's label in figures: its demangled name without
// parameters, cut to a readable length.
func shortName(k Kernel) string {
	n := k.Demangled
	if n == "" {
		n = k.Name
	}
	if i := strings.IndexByte(n, '('); i > 0 {
		n = n[:i]
	}
	if len(n) > 32 {
		n = n[:29] + "..."
	}
	return n
}

// figureEndToEnd draws the repeats of the application's wall time untuned
// and tuned as box plots, with each run as a point and replay's prediction
// as a line.
func figureEndToEnd(r *Report) (string, error) {
	p := plot.New()
	p.Title.Text = "End-to-end time (each run)"
	p.Y.Label.Text = "seconds"
	width := vg.Points(40)
	for i, xs := range [][]float64{r.EndToEnd.UntunedSeconds, r.EndToEnd.TunedSeconds} {
		if len(xs) == 0 {
			continue
		}
		vals := plotter.Values(xs)
		box, err := plotter.NewBoxPlot(width, float64(i), vals)
		if err != nil {
			return "", err
		}
		box.FillColor = plotutil.Color(i)
		p.Add(box)
		pts := make(plotter.XYs, len(xs))
		for j, x := range xs {
			pts[j] = plotter.XY{X: float64(i) + 0.25, Y: x}
		}
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			return "", err
		}
		sc.GlyphStyle.Shape = draw.CircleGlyph{}
		sc.GlyphStyle.Radius = vg.Points(2.5)
		p.Add(sc)
	}
	if pred := r.EndToEnd.PredictedTunedSeconds; pred > 0 {
		line, err := plotter.NewLine(plotter.XYs{{X: 0.7, Y: pred}, {X: 1.3, Y: pred}})
		if err != nil {
			return "", err
		}
		line.Color = color.RGBA{R: 200, A: 255}
		line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(line)
		p.Legend.Add("predicted tuned (replay)", line)
	}
	p.NominalX("untuned", "tuned")
	p.Y.Min = 0
	return svgOf(p, 5*vg.Inch, 3.5*vg.Inch)
}

// figureAmdahl draws the application's time three ways as stacked bars —
// untuned, predicted by replay and measured in the application — each split
// into the largest kernels' GPU time and the rest, so a kernel's share and
// what its speedup buys are seen together.
func figureAmdahl(r *Report) (string, error) {
	ks := append([]Kernel(nil), r.Kernels...)
	SortByShare(ks)
	untuned := Median(r.EndToEnd.UntunedSeconds)
	tuned := Median(r.EndToEnd.TunedSeconds)
	shown := ks
	if len(shown) > maxLegendKernels {
		shown = shown[:maxLegendKernels]
	}
	after := func(k Kernel, speedup float64) float64 {
		if k.Status == StatusKept && speedup > 0 {
			return k.GPUSeconds / speedup
		}
		return k.GPUSeconds
	}
	var kernelSums [3]float64
	var series []plotter.Values
	var labels []string
	for _, k := range shown {
		v := plotter.Values{k.GPUSeconds, after(k, k.PredictedSpeedup), after(k, k.MeasuredSpeedup)}
		for i := range v {
			kernelSums[i] += v[i]
		}
		series = append(series, v)
		labels = append(labels, shortName(k))
	}
	var other plotter.Values = plotter.Values{0, 0, 0}
	for _, k := range ks[len(shown):] {
		other[0] += k.GPUSeconds
		other[1] += after(k, k.PredictedSpeedup)
		other[2] += after(k, k.MeasuredSpeedup)
	}
	for i := range other {
		kernelSums[i] += other[i]
	}
	totals := [3]float64{untuned, r.EndToEnd.PredictedTunedSeconds, tuned}
	rest := plotter.Values{0, 0, 0}
	for i := range rest {
		rest[i] = math.Max(0, totals[i]-kernelSums[i])
	}
	p := plot.New()
	p.Title.Text = "Where the time goes (Amdahl)"
	p.X.Label.Text = "seconds"
	width := vg.Points(28)
	var below *plotter.BarChart
	add := func(v plotter.Values, label string, c color.Color) error {
		b, err := plotter.NewBarChart(v, width)
		if err != nil {
			return err
		}
		b.Horizontal = true
		b.Color = c
		b.LineStyle.Width = 0
		if below != nil {
			b.StackOn(below)
		}
		below = b
		p.Add(b)
		p.Legend.Add(label, b)
		return nil
	}
	for i, v := range series {
		if err := add(v, labels[i], plotutil.Color(i)); err != nil {
			return "", err
		}
	}
	if other[0] > 0 {
		if err := add(other, "other kernels", color.Gray{Y: 150}); err != nil {
			return "", err
		}
	}
	if err := add(rest, "host and idle", color.Gray{Y: 220}); err != nil {
		return "", err
	}
	p.NominalY("untuned", "predicted", "measured")
	p.Legend.Top = true
	p.Legend.Left = false
	p.X.Min = 0
	return svgOf(p, 7*vg.Inch, 3.5*vg.Inch)
}

// figureSpeedups draws each tuned kernel's speedup predicted by replay
// beside the one measured in the application, labelled with its time share.
func figureSpeedups(r *Report) (string, error) {
	var pred, meas plotter.Values
	var names []string
	for _, k := range r.Kernels {
		if k.PredictedSpeedup <= 0 {
			continue
		}
		pred = append(pred, k.PredictedSpeedup)
		meas = append(meas, k.MeasuredSpeedup)
		names = append(names, fmt.Sprintf("%s (%.0f%%)", shortName(k), 100*k.Share))
	}
	if len(pred) == 0 {
		return "", nil
	}
	p := plot.New()
	p.Title.Text = "Speedup per kernel: replay vs application"
	p.Y.Label.Text = "speedup (x)"
	w := vg.Points(14)
	bp, err := plotter.NewBarChart(pred, w)
	if err != nil {
		return "", err
	}
	bp.Color = plotutil.Color(0)
	bp.Offset = -w / 2
	bm, err := plotter.NewBarChart(meas, w)
	if err != nil {
		return "", err
	}
	bm.Color = plotutil.Color(1)
	bm.Offset = w / 2
	one, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: 1}, {X: float64(len(pred)) - 0.5, Y: 1}})
	if err != nil {
		return "", err
	}
	one.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
	p.Add(bp, bm, one)
	p.Legend.Add("predicted (replay)", bp)
	p.Legend.Add("measured (application)", bm)
	p.Legend.Top = true
	p.NominalX(names...)
	p.Y.Min = 0
	// Headroom above the tallest bar keeps the legend off the bars.
	top := 1.0
	for i := range pred {
		top = math.Max(top, math.Max(pred[i], meas[i]))
	}
	p.Y.Max = 1.3 * top
	return svgOf(p, vg.Length(math.Max(5, 1.2*float64(len(pred))))*vg.Inch, 3.5*vg.Inch)
}

// figureTuningCurve draws one kernel's trials: each verified trial's time,
// the best so far as a line, the baseline, and the trials that did not
// verify as crosses along the top.
func figureTuningCurve(k Kernel) (string, error) {
	if len(k.Trials) == 0 {
		return "", nil
	}
	var ok, bad, best plotter.XYs
	top := k.BaselineNS
	for _, t := range k.Trials {
		top = math.Max(top, t.TimeNS)
	}
	bestSoFar := math.Inf(1)
	for _, t := range k.Trials {
		x := float64(t.Number)
		if t.Verified() {
			ok = append(ok, plotter.XY{X: x, Y: t.TimeNS / 1e3})
			bestSoFar = math.Min(bestSoFar, t.TimeNS)
		} else {
			bad = append(bad, plotter.XY{X: x, Y: 1.05 * top / 1e3})
		}
		if !math.IsInf(bestSoFar, 1) {
			best = append(best, plotter.XY{X: x, Y: bestSoFar / 1e3})
		}
	}
	p := plot.New()
	p.Title.Text = "Tuning: " + shortName(k)
	p.X.Label.Text = "trial"
	p.Y.Label.Text = "kernel time (us)"
	if len(ok) > 0 {
		sc, err := plotter.NewScatter(ok)
		if err != nil {
			return "", err
		}
		sc.GlyphStyle.Shape = draw.CircleGlyph{}
		sc.GlyphStyle.Color = plotutil.Color(0)
		p.Add(sc)
		p.Legend.Add("verified trial", sc)
	}
	if len(best) > 0 {
		line, err := plotter.NewLine(best)
		if err != nil {
			return "", err
		}
		line.StepStyle = plotter.PostStep
		line.Color = plotutil.Color(1)
		line.Width = vg.Points(1.5)
		p.Add(line)
		p.Legend.Add("best so far", line)
	}
	if len(bad) > 0 {
		sc, err := plotter.NewScatter(bad)
		if err != nil {
			return "", err
		}
		sc.GlyphStyle.Shape = draw.CrossGlyph{}
		sc.GlyphStyle.Color = color.RGBA{R: 200, A: 255}
		p.Add(sc)
		p.Legend.Add("failed or refused trial", sc)
	}
	if k.BaselineNS > 0 && len(k.Trials) > 0 {
		last := float64(k.Trials[len(k.Trials)-1].Number)
		line, err := plotter.NewLine(plotter.XYs{{X: 0, Y: k.BaselineNS / 1e3}, {X: last, Y: k.BaselineNS / 1e3}})
		if err != nil {
			return "", err
		}
		line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(line)
		p.Legend.Add("baseline", line)
	}
	// The curve falls from the top left: the bottom left stays clear.
	p.Legend.Left = true
	p.Y.Min = 0
	return svgOf(p, 5*vg.Inch, 3*vg.Inch)
}
