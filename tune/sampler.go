package tune

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/mneme-gpu/mneme"
)

// Sampler proposes points of a space (ask) and learns from their outcomes
// (tell). Every sampler returns only feasible points (Space.Evaluate accepts
// them) and never the same point twice; Ask reports false when it has nothing
// more to propose.
type Sampler interface {
	Ask() (Point, bool)
	// Tell reports a point's loss (lower is better) and its trial status;
	// a status other than "verified" marks a failed trial.
	Tell(pt Point, loss float64, status mneme.Status)
	Name() string
}

// Sampler names accepted by NewSampler.
var SamplerNames = []string{"exhaustive", "grid", "random", "tpe"}

// NewSampler builds the sampler called name ("grid" is "exhaustive").
func NewSampler(name string, s *Space, seed uint64) (Sampler, error) {
	switch strings.ToLower(name) {
	case "exhaustive", "grid":
		return NewExhaustive(s)
	case "random":
		return NewRandom(s, seed), nil
	case "tpe":
		return NewTPE(s, seed, DefaultTPEOptions()), nil
	}
	return nil, fmt.Errorf("unknown sampler %q (want %s)", name, strings.Join(SamplerNames, ", "))
}

// Exhaustive enumerates every feasible point of a finite space, in a fixed
// order: the last parameter varies fastest.
type Exhaustive struct {
	space *Space
	idx   []int
	done  bool
}

// NewExhaustive fails for a space with a continuous parameter.
func NewExhaustive(s *Space) (*Exhaustive, error) {
	for _, p := range s.Params {
		if !p.Finite() {
			return nil, fmt.Errorf("exhaustive search needs a finite space: parameter %q is a continuous range (give it a step, or use random or tpe)", p.Name)
		}
	}
	return &Exhaustive{space: s, idx: make([]int, len(s.Params))}, nil
}

// Name implements Sampler.
func (e *Exhaustive) Name() string { return "exhaustive" }

// Ask implements Sampler.
func (e *Exhaustive) Ask() (Point, bool) {
	for !e.done {
		pt := make(Point, len(e.idx))
		for i, p := range e.space.Params {
			pt[p.Name] = p.ValueAt(e.idx[i])
		}
		e.advance()
		if _, err := e.space.Evaluate(pt); err == nil {
			return pt, true
		}
	}
	return nil, false
}

func (e *Exhaustive) advance() {
	for i := len(e.idx) - 1; i >= 0; i-- {
		e.idx[i]++
		if e.idx[i] < e.space.Params[i].Cardinality() {
			return
		}
		e.idx[i] = 0
	}
	e.done = true
}

// Tell implements Sampler; exhaustive search does not learn.
func (e *Exhaustive) Tell(Point, float64, mneme.Status) {}

// maxPermuted is the largest finite space Random walks as a permutation;
// larger spaces are sampled with rejection of repeats.
const maxPermuted = 1 << 20

// maxRejections bounds consecutive rejected draws before a sampler concludes
// that no new feasible point is left.
const maxRejections = 20000

// Random draws points uniformly (log-uniformly for log ranges) with a seeded
// generator. Finite spaces are walked as a random permutation, so every
// feasible point comes exactly once before Ask reports false.
type Random struct {
	space *Space
	rng   *rand.Rand
	seen  map[string]bool
	// permutation state for finite spaces (a sparse Fisher–Yates shuffle)
	size    int64
	next    int64
	swapped map[int64]int64
	permute bool
}

// NewRandom makes a random sampler; the same seed gives the same sequence.
func NewRandom(s *Space, seed uint64) *Random {
	r := &Random{space: s, rng: rand.New(rand.NewPCG(seed, 0x6d6e656d65)), seen: map[string]bool{}, swapped: map[int64]int64{}}
	if n, finite := s.Size(); finite && n <= maxPermuted {
		r.size, r.permute = n, true
	}
	return r
}

// Name implements Sampler.
func (r *Random) Name() string { return "random" }

// Ask implements Sampler.
func (r *Random) Ask() (Point, bool) {
	if r.permute {
		for r.next < r.size {
			j := r.next + r.rng.Int64N(r.size-r.next)
			vj, vi := r.at(j), r.at(r.next)
			r.swapped[j], r.swapped[r.next] = vi, vj
			r.next++
			if pt := pointAt(r.space, vj); r.take(pt) {
				return pt, true
			}
		}
		return nil, false
	}
	for range maxRejections {
		if pt := drawUniform(r.space, r.rng); r.take(pt) {
			return pt, true
		}
	}
	return nil, false
}

// take marks pt as seen and reports whether it is new and feasible.
func (r *Random) take(pt Point) bool {
	k := pt.Key()
	if r.seen[k] {
		return false
	}
	r.seen[k] = true
	_, err := r.space.Evaluate(pt)
	return err == nil
}

// Tell implements Sampler; random search does not learn, but it must not
// propose a point that another source already evaluated.
func (r *Random) Tell(pt Point, _ float64, _ mneme.Status) { r.seen[pt.Key()] = true }

func (r *Random) at(i int64) int64 {
	if v, ok := r.swapped[i]; ok {
		return v
	}
	return i
}

// pointAt decodes a mixed-radix index (last parameter fastest).
func pointAt(s *Space, idx int64) Point {
	pt := make(Point, len(s.Params))
	for i := len(s.Params) - 1; i >= 0; i-- {
		p := s.Params[i]
		c := int64(p.Cardinality())
		pt[p.Name] = p.ValueAt(int(idx % c))
		idx /= c
	}
	return pt
}

// drawUniform draws each parameter independently, as Optuna's RandomSampler.
func drawUniform(s *Space, rng *rand.Rand) Point {
	pt := make(Point, len(s.Params))
	for _, p := range s.Params {
		switch {
		case p.Kind == KindReal && p.Log:
			pt[p.Name] = math.Exp(math.Log(p.Low) + rng.Float64()*(math.Log(p.High)-math.Log(p.Low)))
		case p.Kind == KindReal:
			pt[p.Name] = p.Low + rng.Float64()*(p.High-p.Low)
		case p.Kind == KindInt && p.Log:
			lo, hi := math.Log(p.Low-0.5), math.Log(p.High+0.5)
			v := math.Round(math.Exp(lo + rng.Float64()*(hi-lo)))
			pt[p.Name] = int(math.Min(math.Max(v, p.Low), p.High))
		default:
			pt[p.Name] = p.ValueAt(rng.IntN(p.Cardinality()))
		}
	}
	return pt
}
