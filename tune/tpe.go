package tune

import (
	"math"
	"math/rand/v2"
	"sort"

	"github.com/mneme-gpu/mneme"
	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/stat/distuv"
)

// TPEOptions are the Tree-structured Parzen Estimator's settings; the
// defaults are Optuna's TPESampler defaults (independent, univariate TPE).
type TPEOptions struct {
	NStartupTrials int     // random trials before TPE starts (10)
	NEICandidates  int     // candidates drawn from l(x) per parameter (24)
	PriorWeight    float64 // weight of the prior kernel (1.0)
	MagicClip      bool    // clip the smallest bandwidths (true)
	// ConsiderEndpoints uses the range ends when choosing bandwidths (false).
	ConsiderEndpoints bool
	// Gamma is the number of "good" observations out of n: min(ceil(0.1 n), 25).
	Gamma func(n int) int
	// Weights gives the mixture weights of n observations, oldest first.
	Weights func(n int) []float64
}

// DefaultTPEOptions are Optuna's defaults.
func DefaultTPEOptions() TPEOptions {
	return TPEOptions{NStartupTrials: 10, NEICandidates: 24, PriorWeight: 1.0, MagicClip: true,
		Gamma: DefaultGamma, Weights: DefaultWeights}
}

// DefaultGamma is Optuna's default_gamma.
func DefaultGamma(n int) int {
	g := int(math.Ceil(0.1 * float64(n)))
	if g > 25 {
		g = 25
	}
	return g
}

// DefaultWeights is Optuna's default_weights: flat for fewer than 25
// observations, else a ramp from 1/n up to 1 for the older ones and 1 for
// the newest 25.
func DefaultWeights(n int) []float64 {
	w := make([]float64, n)
	if n < 25 {
		for i := range w {
			w[i] = 1
		}
		return w
	}
	ramp := n - 25
	for i := 0; i < ramp; i++ {
		if ramp == 1 {
			w[i] = 1.0 / float64(n)
		} else {
			w[i] = 1.0/float64(n) + float64(i)*(1.0-1.0/float64(n))/float64(ramp-1)
		}
	}
	for i := ramp; i < n; i++ {
		w[i] = 1
	}
	return w
}

// tpeEPS is Optuna's EPS.
const tpeEPS = 1e-12

type observation struct {
	pt   Point
	loss float64
}

// TPE is Optuna's independent TPE sampler in Go. Failed trials (any status
// but verified) and points the space rejects count as the worst observations,
// as Optuna's constant liar treats unfinished ones. Where Optuna would repeat
// a point of a finite space, this sampler takes the best new candidate, or a
// random new point, since a repeated configuration is a wasted trial.
type TPE struct {
	space  *Space
	opts   TPEOptions
	rng    *rand.Rand
	random *Random
	obs    []observation
	seen   map[string]bool
}

// NewTPE makes a seeded TPE sampler over s.
func NewTPE(s *Space, seed uint64, opts TPEOptions) *TPE {
	if opts.Gamma == nil {
		opts.Gamma = DefaultGamma
	}
	if opts.Weights == nil {
		opts.Weights = DefaultWeights
	}
	if opts.NEICandidates < 1 {
		opts.NEICandidates = 1
	}
	return &TPE{space: s, opts: opts, rng: rand.New(rand.NewPCG(seed, 0x747065)),
		random: NewRandom(s, seed^0x9e3779b97f4a7c15), seen: map[string]bool{}}
}

// Name implements Sampler.
func (t *TPE) Name() string { return "tpe" }

// Tell implements Sampler.
func (t *TPE) Tell(pt Point, loss float64, status mneme.Status) {
	if status != mneme.StatusVerified || math.IsNaN(loss) {
		loss = math.Inf(1)
	}
	t.obs = append(t.obs, observation{pt: pt, loss: loss})
	t.seen[pt.Key()] = true
	t.random.Tell(pt, loss, status)
}

// maxTPEAttempts bounds the TPE proposals per Ask before falling back to a
// random new point.
const maxTPEAttempts = 64

// Ask implements Sampler.
func (t *TPE) Ask() (Point, bool) {
	if len(t.obs) >= t.opts.NStartupTrials && len(t.obs) > 0 {
		below, above := t.split()
		ests := make([][2]*parzen, len(t.space.Params))
		// A discrete value's score is the same on every attempt of this
		// Ask: once TPE has converged it proposes the same seen values
		// again and again, and scoring each again was nearly all its time.
		scores := make([]map[float64]float64, len(t.space.Params))
		for i, p := range t.space.Params {
			if p.Kind == KindFixed || p.Cardinality() == 1 {
				continue
			}
			ests[i] = [2]*parzen{t.estimator(p, below), t.estimator(p, above)}
			if p.Kind != KindReal {
				scores[i] = map[float64]float64{}
			}
		}
		for range maxTPEAttempts {
			pt := Point{}
			for i, p := range t.space.Params {
				if ests[i][0] == nil {
					pt[p.Name] = p.ValueAt(0)
					continue
				}
				pt[p.Name] = t.proposeParam(ests[i][0], ests[i][1], scores[i])
			}
			k := pt.Key()
			if t.seen[k] {
				continue
			}
			if _, err := t.space.Evaluate(pt); err != nil {
				// Learn that this region is infeasible, as a failed trial.
				t.Tell(pt, math.Inf(1), mneme.StatusInvalidConfig)
				continue
			}
			t.seen[k] = true
			t.random.Tell(pt, 0, "")
			return pt, true
		}
	}
	pt, ok := t.random.Ask()
	if ok {
		t.seen[pt.Key()] = true
	}
	return pt, ok
}

// split orders the observations by loss (ties by age) and returns the
// gamma(n) best and the rest, each in chronological order.
func (t *TPE) split() (below, above []observation) {
	n := len(t.obs)
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return t.obs[idx[a]].loss < t.obs[idx[b]].loss })
	nb := t.opts.Gamma(n)
	if nb > n {
		nb = n
	}
	bi, ai := append([]int(nil), idx[:nb]...), append([]int(nil), idx[nb:]...)
	sort.Ints(bi)
	sort.Ints(ai)
	for _, i := range bi {
		below = append(below, t.obs[i])
	}
	for _, i := range ai {
		above = append(above, t.obs[i])
	}
	return below, above
}

// proposeParam draws NEICandidates values from l(x) and returns the one with
// the largest log l(x) - log g(x); memo (nil for reals) keeps the scores of
// discrete values already scored in this Ask.
func (t *TPE) proposeParam(l, g *parzen, memo map[float64]float64) any {
	best, bestScore := 0.0, math.Inf(-1)
	for range t.opts.NEICandidates {
		x := l.sample(t.rng)
		score, known := memo[x]
		if !known {
			score = l.logPDF(x) - g.logPDF(x)
			if memo != nil {
				memo[x] = score
			}
		}
		if score > bestScore {
			best, bestScore = x, score
		}
	}
	return l.external(best)
}

// parzen is the Parzen estimator of one parameter: a mixture of one kernel
// per observation plus the prior, in the transformed (log or index) space.
type parzen struct {
	param   Param
	weights []float64 // mixture weights, normalized
	// numerical kernels (truncated normals)
	mus, sigmas []float64
	low, high   float64 // truncation bounds, transformed
	step        float64 // >0 for ints (in untransformed units)
	log         bool
	// categorical kernels: one probability row per kernel
	cat [][]float64
	// logW and logZ cache log weights and each kernel's log truncation mass.
	logW, logZ []float64
}

// prepare caches what logPDF needs for every candidate.
func (pe *parzen) prepare() {
	pe.logW = make([]float64, len(pe.weights))
	for k, w := range pe.weights {
		pe.logW[k] = math.Log(w)
	}
	if pe.cat != nil {
		return
	}
	pe.logZ = make([]float64, len(pe.mus))
	for k := range pe.mus {
		pe.logZ[k] = math.Log(math.Max(normMass(pe.mus[k], math.Max(pe.sigmas[k], tpeEPS), pe.low, pe.high), tpeEPS))
	}
}

func (t *TPE) estimator(p Param, obs []observation) *parzen {
	vals := make([]float64, 0, len(obs))
	for _, o := range obs {
		v, ok := p.internal(o.pt[p.Name])
		if ok {
			vals = append(vals, v)
		}
	}
	pe := &parzen{param: p}
	if len(vals) == 0 {
		pe.weights = []float64{1}
	} else {
		pe.weights = append(t.opts.Weights(len(vals))[:len(vals):len(vals)], t.opts.PriorWeight)
		floats.Scale(1/floats.Sum(pe.weights), pe.weights)
	}
	if p.Kind != KindInt && p.Kind != KindReal {
		pe.categorical(vals, t.opts.PriorWeight)
	} else {
		pe.numerical(vals, t.opts)
	}
	pe.prepare()
	return pe
}

// internal maps a value to the estimator's representation: the choice index
// for categorical kinds, the number for ranges.
func (p Param) internal(v any) (float64, bool) {
	if p.Kind == KindInt || p.Kind == KindReal {
		return toFloat(v)
	}
	i, ok := p.IndexOf(v)
	return float64(i), ok
}

func (pe *parzen) categorical(vals []float64, priorWeight float64) {
	n := pe.param.Cardinality()
	if len(vals) == 0 {
		row := make([]float64, n)
		for i := range row {
			row[i] = 1 / float64(n)
		}
		pe.cat = [][]float64{row}
		return
	}
	kernels := len(vals) + 1
	pe.cat = make([][]float64, kernels)
	for k := range pe.cat {
		row := make([]float64, n)
		for i := range row {
			row[i] = priorWeight / float64(kernels)
		}
		if k < len(vals) {
			row[int(vals[k])]++
		}
		if s := floats.Sum(row); s > 0 {
			floats.Scale(1/s, row)
		}
		pe.cat[k] = row
	}
}

func (pe *parzen) numerical(vals []float64, opts TPEOptions) {
	p := pe.param
	low, high := p.Low, p.High
	if p.Kind == KindInt {
		pe.step = p.Step
		low -= p.Step / 2
		high += p.Step / 2
	}
	pe.log = p.Log
	if p.Log {
		low, high = math.Log(low), math.Log(high)
		for i := range vals {
			vals[i] = math.Log(vals[i])
		}
	}
	pe.low, pe.high = low, high
	// Bandwidths: the larger gap to the neighbours among the sorted means
	// (prior mean included), with the range ends as outer neighbours.
	prior := 0.5 * (low + high)
	mus := append(append([]float64(nil), vals...), prior)
	order := make([]int, len(mus))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return mus[order[a]] < mus[order[b]] })
	ext := make([]float64, len(mus)+2)
	ext[0], ext[len(ext)-1] = low, high
	for i, o := range order {
		ext[i+1] = mus[o]
	}
	sorted := make([]float64, len(mus))
	for i := range sorted {
		sorted[i] = math.Max(ext[i+1]-ext[i], ext[i+2]-ext[i+1])
	}
	if !opts.ConsiderEndpoints && len(ext) >= 4 {
		sorted[0] = ext[2] - ext[1]
		sorted[len(sorted)-1] = ext[len(ext)-2] - ext[len(ext)-3]
	}
	sigmas := make([]float64, len(mus))
	for i, o := range order {
		sigmas[o] = sorted[i]
	}
	sigmas = sigmas[:len(vals)]
	maxSigma := high - low
	minSigma := tpeEPS
	if opts.MagicClip {
		minSigma = (high - low) / math.Min(100, 1+float64(len(vals)+1))
	}
	for i := range sigmas {
		sigmas[i] = math.Min(math.Max(sigmas[i], minSigma), maxSigma)
	}
	pe.mus = append(vals, prior)
	pe.sigmas = append(sigmas, high-low)
	if p.Kind == KindReal && p.Log {
		pe.low, pe.high = math.Log(p.Low), math.Log(p.High)
	} else if p.Kind == KindReal {
		pe.low, pe.high = p.Low, p.High
	}
}

// sample draws one value (in the untransformed, internal representation).
func (pe *parzen) sample(rng *rand.Rand) float64 {
	k := pickWeighted(pe.weights, rng)
	if pe.cat != nil {
		return float64(pickWeighted(pe.cat[k], rng))
	}
	y := sampleTruncNormal(pe.mus[k], pe.sigmas[k], pe.low, pe.high, rng)
	x := y
	if pe.log {
		x = math.Exp(y)
	}
	if pe.step > 0 {
		x = pe.align(x)
	}
	return x
}

func (pe *parzen) align(x float64) float64 {
	p := pe.param
	v := math.Round((x-p.Low)/p.Step)*p.Step + p.Low
	return math.Min(math.Max(v, p.Low), p.High)
}

// logPDF is the log density (log mass for ints and categories) of x.
func (pe *parzen) logPDF(x float64) float64 {
	terms := make([]float64, len(pe.weights))
	for k := range pe.weights {
		var lp float64
		switch {
		case pe.cat != nil:
			lp = math.Log(pe.cat[k][int(x)])
		case pe.step > 0:
			lo, hi := x-pe.step/2, x+pe.step/2
			if pe.log {
				lo, hi = math.Log(lo), math.Log(hi)
			}
			lp = math.Log(math.Max(normMass(pe.mus[k], math.Max(pe.sigmas[k], tpeEPS), lo, hi), tpeEPS)) - pe.logZ[k]
		default:
			y := x
			if pe.log {
				y = math.Log(x)
			}
			s := math.Max(pe.sigmas[k], tpeEPS)
			lp = distuv.UnitNormal.LogProb((y-pe.mus[k])/s) - math.Log(s) - pe.logZ[k]
		}
		terms[k] = lp + pe.logW[k]
	}
	return floats.LogSumExp(terms)
}

// external converts an internal value back to the parameter's value.
func (pe *parzen) external(x float64) any {
	switch pe.param.Kind {
	case KindInt:
		return int(math.Round(x))
	case KindReal:
		return math.Min(math.Max(x, pe.param.Low), pe.param.High)
	default:
		return pe.param.ValueAt(int(x))
	}
}

func pickWeighted(w []float64, rng *rand.Rand) int {
	u := rng.Float64()
	acc := 0.0
	for i, x := range w {
		acc += x
		if u < acc {
			return i
		}
	}
	return len(w) - 1
}

// normMass is P(lo ≤ X ≤ hi) for X ~ N(mu, sigma), computed on the side of
// the distribution that keeps precision in the tails.
func normMass(mu, sigma, lo, hi float64) float64 {
	a, b := (lo-mu)/sigma, (hi-mu)/sigma
	// erfc keeps relative precision far into its tail (gonum's Survival is
	// 1 - CDF there: 2% off at 8 sigma, 0 beyond 8.3).
	if a > 0 {
		return 0.5 * (math.Erfc(a/math.Sqrt2) - math.Erfc(b/math.Sqrt2))
	}
	return 0.5 * (math.Erfc(-b/math.Sqrt2) - math.Erfc(-a/math.Sqrt2))
}

// sampleTruncNormal draws from N(mu, sigma) truncated to [lo, hi] by the
// inverse CDF, mirrored into the lower tail where that keeps precision.
func sampleTruncNormal(mu, sigma, lo, hi float64, rng *rand.Rand) float64 {
	if lo >= hi {
		return lo
	}
	sigma = math.Max(sigma, tpeEPS)
	a, b := (lo-mu)/sigma, (hi-mu)/sigma
	flip := a > 0
	if flip {
		a, b = -b, -a
	}
	ca, cb := distuv.UnitNormal.CDF(a), distuv.UnitNormal.CDF(b)
	var z float64
	if cb-ca < 1e-300 {
		z = a + rng.Float64()*(b-a) // the mass is negligible: fall back to uniform
	} else {
		z = distuv.UnitNormal.Quantile(ca + rng.Float64()*(cb-ca))
	}
	z = math.Min(math.Max(z, a), b)
	if flip {
		z = -z
	}
	return mu + z*sigma
}
