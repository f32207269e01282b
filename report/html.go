package report

import (
	"bytes"
	"fmt"
	"html/template"
	"sort"
	"strings"
)

// HTML renders the report as one self-contained page: the figures inline as
// SVG, the tables, and a few lines of script that sort the kernel table and
// mark the page ready (a headless browser checks that mark).
func HTML(r *Report) ([]byte, error) {
	if err := r.Check(); err != nil {
		return nil, err
	}
	ks := append([]Kernel(nil), r.Kernels...)
	SortByShare(ks)
	page := pageData{R: r, Kernels: ks}
	var err error
	figure := func(f func(*Report) (string, error)) template.HTML {
		if err != nil {
			return ""
		}
		var s string
		s, err = f(r)
		return template.HTML(s) // gonum/plot's SVG: markup we made, names escaped by it
	}
	page.EndToEnd = figure(figureEndToEnd)
	page.Amdahl = figure(figureAmdahl)
	page.Speedups = figure(figureSpeedups)
	for _, k := range ks {
		if err != nil {
			break
		}
		var s string
		if s, err = figureTuningCurve(k); s != "" {
			page.Curves = append(page.Curves, curve{Name: shortName(k), SVG: template.HTML(s)})
		}
	}
	if err != nil {
		return nil, fmt.Errorf("drawing the report's figures: %w", err)
	}
	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, page); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

type curve struct {
	Name string
	SVG  template.HTML
}

type pageData struct {
	R                          *Report
	Kernels                    []Kernel
	EndToEnd, Amdahl, Speedups template.HTML
	Curves                     []curve
}

// configText is a configuration as "key=value" pairs in a stable order:
// launch dimensions as XxYxZ, and switches that are off, zero counts and
// empty lists left out, so what was chosen stands out.
func configText(c map[string]any) string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		if v := valueText(c[k]); v != "" {
			parts = append(parts, k+"="+v)
		}
	}
	return strings.Join(parts, " ")
}

// valueText writes one configuration value; "" for one not worth showing.
func valueText(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case bool:
		if !x {
			return ""
		}
		return "on"
	case float64:
		if x == 0 {
			return ""
		}
		return fmt.Sprint(x)
	case string:
		return x
	case []any:
		if len(x) == 0 {
			return ""
		}
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = fmt.Sprint(e)
		}
		return strings.Join(parts, ",")
	case map[string]any:
		if dx, ok := x["x"]; ok {
			return fmt.Sprintf("%vx%vx%v", dx, x["y"], x["z"])
		}
	}
	return fmt.Sprint(v)
}

var pageTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"pct":     func(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) },
	"x":       func(f float64) string { return speedupText(f) },
	"secs":    func(f float64) string { return fmt.Sprintf("%.3f s", f) },
	"median":  Median,
	"config":  configText,
	"speedup": func(e EndToEnd) string { return speedupText(e.Speedup()) },
	"short":   shortName,
	"spread":  spreadText,
	"join":    strings.Join,
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>mneme optimize: {{.R.Application}}</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.9em}td,th{padding:.25em .6em;border-bottom:1px solid #eee;text-align:left}
th{cursor:pointer;background:#f6f6f6}td.n{text-align:right;font-variant-numeric:tabular-nums}
.kept{color:#176b26}.dropped{color:#a4262c}.untuned,.no-result{color:#777}
.big{font-size:2em;font-weight:600}.figs{display:flex;flex-wrap:wrap;gap:1em}.figs svg{max-width:100%;height:auto}
code{font-size:.85em}
</style></head>
<body data-ready="0">
<h1>mneme optimize: <code>{{.R.Application}} {{join .R.Args " "}}</code></h1>
<p>{{if .R.GPU}}{{.R.GPU}}, {{end}}{{if .R.Driver}}driver {{.R.Driver}}, {{end}}{{if .R.Toolchain}}{{.R.Toolchain}}, {{end}}{{.R.Created}}{{if .R.Budget}}; tuning budget {{.R.Budget}}, used {{printf "%.0f" .R.TuningSeconds}} s{{end}}</p>
<p class="big" id="speedup">{{speedup .R.EndToEnd}} end to end</p>
<p>Median wall time {{secs (median .R.EndToEnd.UntunedSeconds)}} untuned, {{secs (median .R.EndToEnd.TunedSeconds)}} tuned
(predicted from replay: {{secs .R.EndToEnd.PredictedTunedSeconds}}{{if .R.EndToEnd.DeployCostSeconds}}, deploying taken to cost {{secs .R.EndToEnd.DeployCostSeconds}}{{end}});
{{len .R.EndToEnd.UntunedSeconds}} + {{len .R.EndToEnd.TunedSeconds}} interleaved runs.
{{if and .R.EndToEnd.UntunedOwn .R.EndToEnd.TunedOwn}}By the application's own timer (<code>{{.R.EndToEnd.OwnTimer}}</code>): {{printf "%.4g" (median .R.EndToEnd.UntunedOwn)}} untuned, {{printf "%.4g" (median .R.EndToEnd.TunedOwn)}} tuned (median, in its units).
{{end}}{{if .R.EndToEnd.OutputChecked}}{{if .R.EndToEnd.OutputSame}}The application's output was the same tuned{{else}}The application's output differed when tuned{{end}}{{with .R.EndToEnd.OutputFilter}} (lines matching <code>{{.}}</code> left out){{end}}.{{else}}Output not compared.{{end}}</p>
{{range .R.Notes}}<p class="note">{{.}}</p>{{end}}
<div class="figs">
<figure id="fig-end-to-end">{{.EndToEnd}}</figure>
<figure id="fig-amdahl">{{.Amdahl}}</figure>
{{if .Speedups}}<figure id="fig-speedups">{{.Speedups}}</figure>{{end}}
</div>
<h2>Kernels</h2>
<table id="kernels"><thead><tr><th>kernel</th><th>share</th><th>launches</th><th>status</th><th>replay</th><th>application</th><th>in-app per launch untuned / tuned</th><th>why</th></tr></thead><tbody>
{{range .Kernels}}<tr><td title="{{.Name}}">{{short .}}{{if .Reused}} (reused){{end}}</td><td class="n" data-v="{{.Share}}">{{pct .Share}}</td><td class="n" data-v="{{.Launches}}">{{.Launches}}</td>
<td class="{{.Status}}">{{.Status}}</td><td class="n" data-v="{{.PredictedSpeedup}}">{{x .PredictedSpeedup}}</td><td class="n" data-v="{{.MeasuredSpeedup}}">{{x .MeasuredSpeedup}}</td>
<td class="n">{{spread .InAppUntunedNS}} / {{spread .InAppTunedNS}}</td><td>{{.Reason}}</td></tr>
{{end}}</tbody></table>
<h2>Configurations chosen</h2>
<table id="configs"><thead><tr><th>kernel</th><th>launch shape</th><th>configuration</th></tr></thead><tbody>
{{range .Kernels}}{{$k := .}}{{range .Classes}}<tr><td>{{short $k}}</td><td><code>{{.Shape}}</code></td><td><code>{{config .Config}}</code></td></tr>{{end}}{{end}}
</tbody></table>
<h2>Tuning curves</h2>
<div class="figs">{{range .Curves}}<figure>{{.SVG}}</figure>{{end}}</div>
<script>
(function(){
  var t=document.getElementById("kernels");
  t.querySelectorAll("th").forEach(function(th,col){
    th.addEventListener("click",function(){
      var rows=Array.prototype.slice.call(t.tBodies[0].rows);
      rows.sort(function(a,b){
        var x=a.cells[col],y=b.cells[col];
        if(x.dataset.v!==undefined)return parseFloat(y.dataset.v)-parseFloat(x.dataset.v);
        return x.textContent.localeCompare(y.textContent);
      });
      rows.forEach(function(r){t.tBodies[0].appendChild(r);});
    });
  });
  document.body.dataset.figures=String(document.querySelectorAll("figure svg").length);
  document.body.dataset.ready="1";
})();
</script>
</body></html>
`))

func speedupText(f float64) string {
	if f <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", f)
}

// spreadText is a list of per-launch times as "median (min-max)".
func spreadText(ns []float64) string {
	if len(ns) == 0 {
		return "-"
	}
	lo, hi := ns[0], ns[0]
	for _, v := range ns {
		lo, hi = min(lo, v), max(hi, v)
	}
	return fmt.Sprintf("%s (%s-%s)", fmtNS(Median(ns)), fmtNS(lo), fmtNS(hi))
}

func fmtNS(ns float64) string {
	switch {
	case ns >= 1e9:
		return fmt.Sprintf("%.2f s", ns/1e9)
	case ns >= 1e6:
		return fmt.Sprintf("%.2f ms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.1f us", ns/1e3)
	}
	return fmt.Sprintf("%.0f ns", ns)
}
