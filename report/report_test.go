package report

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func sample(t *testing.T) *Report {
	t.Helper()
	r, err := Read(filepath.Join("testdata", "sample.json"))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestHTMLHoldsEveryFigureInline(t *testing.T) {
	r := sample(t)
	page, err := HTML(r)
	if err != nil {
		t.Fatal(err)
	}
	s := string(page)
	// End-to-end, Amdahl, speedups, and one tuning curve (only the kept
	// kernel has trials).
	if n := strings.Count(s, "<svg"); n != 4 {
		t.Errorf("page has %d inline SVG figures, want 4", n)
	}
	for _, id := range []string{`id="fig-end-to-end"`, `id="fig-amdahl"`, `id="fig-speedups"`, `id="kernels"`, `id="configs"`} {
		if !strings.Contains(s, id) {
			t.Errorf("page lacks %s", id)
		}
	}
	if regexp.MustCompile(`(?i)(src|href)\s*=\s*"(https?:)?//`).MatchString(s) {
		t.Error("page loads something from the network; it must be self-contained")
	}
	if !strings.Contains(s, "1.33x end to end") {
		t.Errorf("page does not state the median end-to-end speedup 1.21/0.91=1.33x")
	}
	if !strings.Contains(s, "slower in the application (0.97x)") {
		t.Error("page does not say why the dropped kernel was dropped")
	}
	// Switches that are off and zero counts are left out.
	if !strings.Contains(s, "block=128x1x1 grid=1024x1x1 passes=default&lt;O3&gt; specialize=on specialize_args=2,3</code>") {
		t.Error("page does not show the chosen configuration, escaped")
	}
}

func TestHTMLSaysWhichOutputLinesWereLeftOut(t *testing.T) {
	r := sample(t)
	page, err := HTML(r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), "The application's output was the same tuned.") || strings.Contains(string(page), "left out") {
		t.Error("without a filter, the page should say the output was the same, and nothing of lines left out")
	}
	r.EndToEnd.OutputFilter = `^<b>time</b> = [0-9.]+ ms`
	if page, err = HTML(r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), "The application's output was the same tuned (lines matching <code>^&lt;b&gt;time&lt;/b&gt; = [0-9.]&#43; ms</code> left out).") {
		t.Errorf("the page does not name the output filter, escaped: %s", regexp.MustCompile(`(?s)The application's output.{0,200}`).FindString(string(page)))
	}
	r.EndToEnd.OutputSame = false
	if page, err = HTML(r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), "The application's output differed when tuned (lines matching") {
		t.Error("a differing output with a filter is not said so")
	}
}

func TestHTMLEscapesNamesFromTheApplication(t *testing.T) {
	r := sample(t)
	r.Kernels[0].Demangled = `<script>alert(1)</script>`
	r.Kernels[1].Reason = `<img src=x onerror=alert(1)>`
	page, err := HTML(r)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(page), "<script>alert") || strings.Contains(string(page), "<img src=x") {
		t.Error("a name from the application reached the page unescaped")
	}
}

func TestPredictTunedCountsOnlyKeptKernels(t *testing.T) {
	ks := []Kernel{
		{Name: "a", GPUSeconds: 0.6, Status: StatusKept, PredictedSpeedup: 2},
		{Name: "b", GPUSeconds: 0.3, Status: StatusDropped, PredictedSpeedup: 3},
		{Name: "c", GPUSeconds: 0.1, Status: StatusKept},
	}
	if got := PredictTuned(1.2, ks, 0); got < 0.8999 || got > 0.9001 {
		t.Errorf("PredictTuned = %v, want 1.2 - 0.6*(1-1/2) = 0.9", got)
	}
	// Deploying costs what it costs once anything is kept.
	if got := PredictTuned(1.2, ks, 0.01); got < 0.9099 || got > 0.9101 {
		t.Errorf("with a deployment cost of 0.01 s: %v, want 0.91", got)
	}
	ks[1].Status = StatusKept
	if got := PredictTuned(1.2, ks, 0); got < 0.6999 || got > 0.7001 {
		t.Errorf("with b kept too: %v, want 0.9 - 0.3*(1-1/3) = 0.7", got)
	}
	// Nothing kept: the application as it is, no cost.
	for i := range ks {
		ks[i].Status = StatusDropped
	}
	if got := PredictTuned(1.2, ks, 0.01); got != 1.2 {
		t.Errorf("nothing kept: %v, want 1.2", got)
	}
}

func TestCheckRefusesFiguresThatCannotBeDrawn(t *testing.T) {
	for name, edit := range map[string]func(*Report){
		"version":    func(r *Report) { r.Version = Version + 1 },
		"no version": func(r *Report) { r.Version = 0 },
		"share":      func(r *Report) { r.Kernels[0].Share = 1.5 },
		"negative":   func(r *Report) { r.EndToEnd.TunedSeconds[0] = -1 },
		"trial":      func(r *Report) { r.Kernels[0].Trials[0].TimeNS = -3 },
		"no name":    func(r *Report) { r.Kernels[2].Name = "" },
	} {
		r := sample(t)
		edit(r)
		if err := r.Check(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestWriteThenReadGivesTheSameReport(t *testing.T) {
	r := sample(t)
	dir := t.TempDir()
	if err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
	back, err := Read(filepath.Join(dir, FileJSON))
	if err != nil {
		t.Fatal(err)
	}
	if back.Kernels[0].Classes[0].Shape != r.Kernels[0].Classes[0].Shape || Median(back.EndToEnd.TunedSeconds) != 0.91 {
		t.Errorf("read back %+v", back)
	}
	// A link planted at report.json is replaced, not followed.
	outside := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(outside, []byte("keep"), 0o644)
	os.Remove(filepath.Join(dir, FileJSON))
	os.Symlink(outside, filepath.Join(dir, FileJSON))
	if err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(outside); string(data) != "keep" {
		t.Error("writing the report went through a link")
	}
}

func FuzzParse(f *testing.F) {
	data, _ := os.ReadFile(filepath.Join("testdata", "sample.json"))
	f.Add(data)
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Parse(data)
		if err != nil {
			return
		}
		if _, err := HTML(r); err != nil {
			t.Fatalf("a report that passed Check could not be drawn: %v", err)
		}
	})
}
