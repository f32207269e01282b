package tune

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mneme-gpu/mneme"
)

// The TPE's search quality rests on arithmetic that a statistical "beats
// random" test cannot pin: these tests check it exactly, against values
// worked out by hand from Optuna's definitions.

func near(a, b, rel float64) bool {
	return math.Abs(a-b) <= rel*math.Max(math.Abs(a), math.Abs(b))
}

func TestNewTPEFillsUnsetOptions(t *testing.T) {
	sp := smoothSpace(IntRange("n", 1, 8, 1))
	tp := NewTPE(sp, 1, TPEOptions{})
	if tp.opts.Gamma == nil || tp.opts.Gamma(100) != 10 || tp.opts.Weights == nil || len(tp.opts.Weights(30)) != 30 || tp.opts.NEICandidates != 1 {
		t.Fatalf("unset options: gamma %v, weights %v, candidates %d", tp.opts.Gamma != nil, tp.opts.Weights != nil, tp.opts.NEICandidates)
	}
	custom := NewTPE(sp, 1, TPEOptions{Gamma: func(int) int { return 7 }, Weights: func(n int) []float64 { return make([]float64, n) }, NEICandidates: 5})
	if custom.opts.Gamma(100) != 7 || custom.opts.Weights(3)[0] != 0 || custom.opts.NEICandidates != 5 {
		t.Fatal("options that were set were replaced")
	}
}

func TestNormMassInBothTails(t *testing.T) {
	for _, c := range []struct {
		mu, sigma, lo, hi, want float64
	}{
		{0, 1, -1, 1, 0.6826894921370859},
		{3, 2, 1, 5, 0.6826894921370859},
		{0, 1, 0, math.Inf(1), 0.5},
		// Far tails: the difference of two CDFs near 1 would cancel to 0.
		{0, 1, 8, 9, 6.220960574271785e-16 - 1.1285884059538324e-19},
		{10, 0.5, 14, 14.5, 6.220960574271785e-16 - 1.1285884059538324e-19},
		{0, 1, -9, -8, 6.220960574271785e-16 - 1.1285884059538324e-19},
	} {
		if got := normMass(c.mu, c.sigma, c.lo, c.hi); !near(got, c.want, 1e-9) {
			t.Errorf("normMass(%v, %v, %v, %v) = %g, want %g", c.mu, c.sigma, c.lo, c.hi, got, c.want)
		}
	}
}

func TestSampleTruncNormalHasTheTruncatedMean(t *testing.T) {
	phi := func(x float64) float64 { return math.Exp(-x*x/2) / math.Sqrt(2*math.Pi) }
	cdf := func(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct{ mu, sigma, lo, hi float64 }{
		{0, 1, 1, 3},    // upper side: sampled mirrored
		{0, 1, -3, -1},  // lower side
		{5, 2, 4, 12},   // straddles the mean
		{-2, 0.5, 0, 1}, // far above the mean
	} {
		a, b := (c.lo-c.mu)/c.sigma, (c.hi-c.mu)/c.sigma
		want := c.mu + c.sigma*(phi(a)-phi(b))/(cdf(b)-cdf(a))
		const n = 40000
		sum := 0.0
		for range n {
			x := sampleTruncNormal(c.mu, c.sigma, c.lo, c.hi, rng)
			if x < c.lo || x > c.hi {
				t.Fatalf("N(%v, %v) on [%v, %v]: drew %v", c.mu, c.sigma, c.lo, c.hi, x)
			}
			sum += x
		}
		if got := sum / n; math.Abs(got-want) > 0.01*(c.hi-c.lo) {
			t.Errorf("N(%v, %v) on [%v, %v]: mean %.4f, want %.4f", c.mu, c.sigma, c.lo, c.hi, got, want)
		}
	}
	// Far tails on either side: sampled on the side where the CDF keeps
	// precision, so the draws crowd the end nearer the mean (mean ~ 29 +
	// 1/29); computed on the other side the mass would round to nothing.
	for _, lo := range []float64{29, -30} {
		sum := 0.0
		for range 10000 {
			sum += sampleTruncNormal(0, 1, lo, lo+1, rng)
		}
		want := 29 + 1.0/29 - 0.0012 // the mean of N(0,1) on [29, 30]
		if lo < 0 {
			want = -want
		}
		if m := sum / 10000; math.Abs(m-want) > 0.01 {
			t.Errorf("N(0, 1) on [%v, %v]: mean %v, want %v", lo, lo+1, m, want)
		}
	}
	// No mass left in double precision: uniform over the interval.
	sum := 0.0
	for range 10000 {
		x := sampleTruncNormal(0, 1, 40, 42, rng)
		if x < 40 || x > 42 {
			t.Fatalf("a massless interval: drew %v", x)
		}
		sum += x
	}
	if m := sum / 10000; math.Abs(m-41) > 0.03 {
		t.Errorf("a massless interval: mean %v, want 41 (uniform)", m)
	}
	if x := sampleTruncNormal(0, 1, 3, 3, rng); x != 3 {
		t.Errorf("an empty interval: drew %v, want its end", x)
	}
}

// estimatorOf builds the below-estimator TPE would build from vals.
func estimatorOf(p Param, opts TPEOptions, vals ...any) *parzen {
	tp := NewTPE(smoothSpace(p), 1, opts)
	var obs []observation
	for _, v := range vals {
		obs = append(obs, observation{pt: Point{p.Name: v}})
	}
	return tp.estimator(p, obs)
}

func TestParzenBandwidthsAreOptunas(t *testing.T) {
	p := RealRange("x", 0, 10, false)
	// Sorted means 2, 3, 5 (the prior), 7 between the ends 0 and 10: each
	// kernel takes the larger gap to a neighbour (2, 2, 2, 3); without
	// endpoints the outer two take their inner gap (1 and 2).
	raw := DefaultTPEOptions()
	raw.MagicClip = false
	pe := estimatorOf(p, raw, 2.0, 3.0, 7.0)
	if !slices.Equal(pe.mus, []float64{2, 3, 7, 5}) || !slices.Equal(pe.sigmas, []float64{1, 2, 2, 10}) {
		t.Fatalf("without endpoints: mus %v sigmas %v, want [2 3 7 5] [1 2 2 10]", pe.mus, pe.sigmas)
	}
	// One observation beside the prior: without endpoints its bandwidth is
	// the gap to the prior (0.5), not the larger gap to the low end.
	if pe := estimatorOf(p, raw, 4.5); pe.sigmas[0] != 0.5 {
		t.Fatalf("one observation at 4.5: sigma %v, want 0.5", pe.sigmas[0])
	}
	raw.ConsiderEndpoints = true
	if pe := estimatorOf(p, raw, 2.0, 3.0, 7.0); !slices.Equal(pe.sigmas, []float64{2, 2, 3, 10}) {
		t.Fatalf("with endpoints: sigmas %v, want [2 2 3 10]", pe.sigmas)
	}
	// The magic clip: no bandwidth below (high-low)/min(100, n+2).
	pe = estimatorOf(p, DefaultTPEOptions(), 2.0, 3.0, 7.0)
	if !slices.Equal(pe.sigmas, []float64{2, 2, 2, 10}) {
		t.Fatalf("clipped: sigmas %v, want [2 2 2 10]", pe.sigmas)
	}
	if pe.low != 0 || pe.high != 10 || pe.step != 0 || pe.log {
		t.Fatalf("bounds %v..%v step %v log %v", pe.low, pe.high, pe.step, pe.log)
	}
	// Weights: flat over the observations and the prior, normalized.
	if !slices.Equal(pe.weights, []float64{0.25, 0.25, 0.25, 0.25}) {
		t.Fatalf("weights %v", pe.weights)
	}
	// Integers widen the range by half a step on each side; logs move to
	// log space, and a log real's bounds are its log ends.
	pi := estimatorOf(IntRange("n", 4, 20, 4), DefaultTPEOptions(), 8)
	if pi.low != 2 || pi.high != 22 || pi.step != 4 || pi.mus[1] != 12 {
		t.Fatalf("int estimator: %v..%v step %v mus %v", pi.low, pi.high, pi.step, pi.mus)
	}
	pl := estimatorOf(RealRange("r", 1, 100, true), DefaultTPEOptions(), 10.0)
	if !near(pl.low, 0, 1e-12) || !near(pl.high, math.Log(100), 1e-12) || !near(pl.mus[0], math.Log(10), 1e-12) || !near(pl.mus[1], math.Log(100)/2, 1e-12) || !pl.log {
		t.Fatalf("log estimator: %v..%v mus %v", pl.low, pl.high, pl.mus)
	}
}

func TestParzenDensitiesIntegrateToOne(t *testing.T) {
	opts := DefaultTPEOptions()
	// Reals, plain and in log space (where the density lives).
	for _, p := range []Param{RealRange("x", -3, 7, false), RealRange("y", 0.5, 80, true)} {
		pe := estimatorOf(p, opts, 1.0, 1.5, 6.5, 2.0)
		const n = 20000
		lo, hi := pe.low, pe.high
		h := (hi - lo) / n
		sum := 0.0
		for i := 0; i <= n; i++ {
			y := lo + float64(i)*h
			x := y
			if p.Log {
				x = math.Exp(y)
			}
			f := math.Exp(pe.logPDF(x))
			if i == 0 || i == n {
				f /= 2
			}
			sum += f * h
		}
		if !near(sum, 1, 1e-3) {
			t.Errorf("%s: the density integrates to %v", p.Name, sum)
		}
	}
	// Integers: the masses of the grid points sum to one.
	p := IntRange("n", 3, 30, 3)
	pe := estimatorOf(p, opts, 6, 6, 27)
	sum := 0.0
	for v := 3; v <= 30; v += 3 {
		sum += math.Exp(pe.logPDF(float64(v)))
	}
	if !near(sum, 1, 1e-9) {
		t.Errorf("int masses sum to %v", sum)
	}
	// Categories: one observation of "b" out of three choices, with the
	// prior: kernel rows (1/2+1)/2 ... worked out: P(b) = (2/3+... )/2.
	c := Categorical("c", "a", "b", "z")
	pc := estimatorOf(c, opts, "b")
	total := 0.0
	for i := range 3 {
		total += math.Exp(pc.logPDF(float64(i)))
	}
	// Kernel 0 (the observation): (1/2 each prior share, +1 on b) / 2.5 →
	// a, z: 0.2, b: 0.6; kernel 1 (prior): 1/3 each; weights 1/2 each.
	if !near(total, 1, 1e-12) || !near(math.Exp(pc.logPDF(1)), (0.6+1.0/3)/2, 1e-12) || !near(math.Exp(pc.logPDF(0)), (0.2+1.0/3)/2, 1e-12) {
		t.Errorf("categorical masses: total %v, P(b) %v, P(a) %v", total, math.Exp(pc.logPDF(1)), math.Exp(pc.logPDF(0)))
	}
}

func TestParzenSamplesStayOnTheGrid(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	pe := estimatorOf(IntRange("n", 3, 19, 4), DefaultTPEOptions(), 7, 7, 19)
	seen := map[float64]bool{}
	for range 2000 {
		x := pe.sample(rng)
		if x < 3 || x > 19 || math.Mod(x-3, 4) != 0 {
			t.Fatalf("an int sample off the grid 3, 7, ..., 19: %v", x)
		}
		seen[x] = true
	}
	if len(seen) != 5 {
		t.Errorf("samples cover %d of the 5 grid points", len(seen))
	}
	if got := pe.align(9.1); got != 11 {
		t.Errorf("align(9.1) = %v, want 11 (the nearest of 3 + 4k)", got)
	}
	if got := pe.align(100); got != 19 {
		t.Errorf("align(100) = %v, want the top 19", got)
	}
	if got := pe.align(-5); got != 3 {
		t.Errorf("align(-5) = %v, want the bottom 3", got)
	}
	pr := estimatorOf(RealRange("r", 1, 2, false), DefaultTPEOptions(), 1.5)
	if pr.external(2.5) != 2.0 || pr.external(0.5) != 1.0 || pr.external(1.25) != 1.25 {
		t.Error("a real value is not clamped to its range")
	}
	if pe.external(10.6) != 11 {
		t.Error("an int value is not rounded")
	}
}

func TestPickWeightedFollowsTheWeights(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	w := []float64{0.1, 0, 0.6, 0.3}
	var counts [4]int
	for range 30000 {
		counts[pickWeighted(w, rng)]++
	}
	for i, p := range w {
		if got := float64(counts[i]) / 30000; math.Abs(got-p) > 0.01 {
			t.Errorf("index %d drawn %.3f of the time, want %.2f", i, got, p)
		}
	}
}

func TestTPESplitsByLossKeepingAge(t *testing.T) {
	tp := NewTPE(smoothSpace(IntRange("n", 0, 9, 1)), 1, TPEOptions{Gamma: func(int) int { return 2 }})
	for i, loss := range []float64{5, 1, 3, 1, math.Inf(1)} {
		tp.obs = append(tp.obs, observation{pt: Point{"n": i}, loss: loss})
	}
	below, above := tp.split()
	ids := func(obs []observation) []int {
		var out []int
		for _, o := range obs {
			out = append(out, o.pt["n"].(int))
		}
		return out
	}
	if !slices.Equal(ids(below), []int{1, 3}) || !slices.Equal(ids(above), []int{0, 2, 4}) {
		t.Fatalf("split: below %v above %v, want [1 3] and [0 2 4]", ids(below), ids(above))
	}
	// A tie at the cut goes to the older observation.
	tp.opts.Gamma = func(int) int { return 1 }
	if below, _ := tp.split(); len(below) != 1 || below[0].pt["n"] != 1 {
		t.Fatalf("gamma 1 with two best of equal loss: below %v, want the older (n=1)", ids(below))
	}
	tp.opts.Gamma = func(int) int { return 99 }
	if below, above := tp.split(); len(below) != 5 || len(above) != 0 {
		t.Fatalf("gamma above n: %d below, %d above", len(below), len(above))
	}
}

func TestTPEStartsAfterItsStartupTrials(t *testing.T) {
	sp := smoothSpace(IntRange("n", 0, 999, 1))
	opts := DefaultTPEOptions()
	opts.NStartupTrials = 3
	tp := NewTPE(sp, 9, opts)
	// Until three results are in, the asks are the fallback random sampler's.
	ref := NewRandom(sp, 9^0x9e3779b97f4a7c15)
	for i := range 3 {
		got, _ := tp.Ask()
		want, _ := ref.Ask()
		if got.Key() != want.Key() {
			t.Fatalf("startup ask %d: %s, want the random sampler's %s", i, got.Key(), want.Key())
		}
		tp.Tell(got, float64(got["n"].(int)), mneme.StatusVerified)
		ref.Tell(want, 0, mneme.StatusVerified)
	}
	// Without startup trials the first ask, having nothing to model, is
	// still the random sampler's.
	opts.NStartupTrials = 0
	first, _ := NewTPE(sp, 5, opts).Ask()
	if want, _ := NewRandom(sp, 5^0x9e3779b97f4a7c15).Ask(); first.Key() != want.Key() {
		t.Errorf("no startup trials: first ask %s, want the random sampler's %s", first.Key(), want.Key())
	}
	// The fourth ask models the three results: it is not the point the
	// random sampler would have given next.
	got, _ := tp.Ask()
	want, _ := ref.Ask()
	if got.Key() == want.Key() {
		t.Fatalf("the ask after the startup trials is the random sampler's %s", want.Key())
	}
}
