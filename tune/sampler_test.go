package tune

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/mneme-gpu/mneme"
)

// gridSpace is a 2D integer space with a triangle constraint.
func gridSpace(t *testing.T) *Space {
	t.Helper()
	params := []Param{IntRange("a", 0, 9, 1), IntRange("b", 0, 18, 2), Bool("flag")}
	c, err := ExprConstraint("a + b <= 12 && (flag || a % 2 == 0)", params, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &Space{Name: "grid", Params: params, Constraints: []Constraint{c},
		Derive: func(pt Point) (mneme.Config, error) {
			return mneme.Config{Block: mneme.Dim3{X: uint32(32 * (pt["a"].(int) + 1)), Y: 1, Z: 1},
				Grid: mneme.Dim3{X: uint32(pt["b"].(int) + 1), Y: 1, Z: 1}, Specialize: pt["flag"].(bool)}, nil
		}}
}

func feasibleByHand() map[string]bool {
	want := map[string]bool{}
	for a := 0; a <= 9; a++ {
		for b := 0; b <= 18; b += 2 {
			for _, f := range []bool{false, true} {
				if a+b <= 12 && (f || a%2 == 0) {
					want[Point{"a": a, "b": b, "flag": f}.Key()] = true
				}
			}
		}
	}
	return want
}

func TestExhaustiveCoversExactlyTheConstrainedSet(t *testing.T) {
	s := gridSpace(t)
	want := feasibleByHand()
	ex, err := NewExhaustive(s)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	got := map[string]bool{}
	for {
		pt, ok := ex.Ask()
		if !ok {
			break
		}
		if got[pt.Key()] {
			t.Fatalf("point %v proposed twice", pt)
		}
		got[pt.Key()] = true
		order = append(order, pt.Key())
	}
	if len(got) != len(want) {
		t.Fatalf("exhaustive gave %d points, the constrained set has %d", len(got), len(want))
	}
	for k := range want {
		if !got[k] {
			t.Errorf("missing %s", k)
		}
	}
	ex2, _ := NewExhaustive(s)
	for i, k := range order {
		pt, _ := ex2.Ask()
		if pt.Key() != k {
			t.Fatalf("order differs at %d: %s vs %s", i, pt.Key(), k)
		}
	}
	if d := s.Describe(); d.Feasible != int64(len(want)) || d.Size != 10*10*2 {
		t.Errorf("Describe: size %d feasible %d, want 200 and %d", d.Size, d.Feasible, len(want))
	}
}

func TestExhaustiveRejectsContinuousSpace(t *testing.T) {
	s := &Space{Name: "c", Params: []Param{RealRange("x", 0, 1, false)}, Derive: func(Point) (mneme.Config, error) { return mneme.Config{}, nil }}
	if _, err := NewExhaustive(s); err == nil {
		t.Fatal("exhaustive accepted a continuous parameter")
	}
}

func TestRandomIsReproducibleAndCoversFiniteSpace(t *testing.T) {
	s := gridSpace(t)
	run := func(seed uint64) []string {
		r := NewRandom(s, seed)
		var keys []string
		for {
			pt, ok := r.Ask()
			if !ok {
				return keys
			}
			keys = append(keys, pt.Key())
		}
	}
	a, b, c := run(7), run(7), run(8)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatal("same seed gave different sequences")
	}
	if fmt.Sprint(a) == fmt.Sprint(c) {
		t.Fatal("different seeds gave the same sequence")
	}
	want := feasibleByHand()
	seen := map[string]bool{}
	for _, k := range a {
		if seen[k] {
			t.Fatalf("duplicate %s", k)
		}
		if !want[k] {
			t.Fatalf("infeasible %s", k)
		}
		seen[k] = true
	}
	if len(seen) != len(want) {
		t.Fatalf("random covered %d of %d points before exhausting", len(seen), len(want))
	}
}

func TestDefaultGammaAndWeightsMatchOptuna(t *testing.T) {
	for n, want := range map[int]int{0: 0, 1: 1, 10: 1, 11: 2, 100: 10, 249: 25, 1000: 25} {
		if g := DefaultGamma(n); g != want {
			t.Errorf("gamma(%d) = %d, want %d", n, g, want)
		}
	}
	if w := DefaultWeights(24); len(w) != 24 || slices.ContainsFunc(w, func(x float64) bool { return x != 1 }) {
		t.Errorf("weights(24) = %v, want 24 ones", w)
	}
	// 26: a ramp of one weight, 1/26, then 25 ones.
	if w := DefaultWeights(26); len(w) != 26 || w[0] != 1.0/26 || w[1] != 1 || w[25] != 1 {
		t.Errorf("weights(26) = %v", w)
	}
	w := DefaultWeights(30) // numpy: linspace(1/30, 1, 5) then 25 ones
	lin := []float64{1.0 / 30, 1.0/30 + (1-1.0/30)/4, 1.0/30 + 2*(1-1.0/30)/4, 1.0/30 + 3*(1-1.0/30)/4, 1}
	for i, v := range lin {
		if math.Abs(w[i]-v) > 1e-12 {
			t.Errorf("weights(30)[%d] = %v, want %v", i, w[i], v)
		}
	}
	for i := 5; i < 30; i++ {
		if w[i] != 1 {
			t.Errorf("weights(30)[%d] = %v, want 1", i, w[i])
		}
	}
}

// optimize runs a sampler for budget trials on f and returns the best value.
func optimize(s Sampler, sp *Space, f func(Point) float64, budget int) float64 {
	best := math.Inf(1)
	for range budget {
		pt, ok := s.Ask()
		if !ok {
			break
		}
		v := f(pt)
		s.Tell(pt, v, mneme.StatusVerified)
		best = math.Min(best, v)
	}
	return best
}

func smoothSpace(params ...Param) *Space {
	return &Space{Name: "smooth", Params: params, Derive: func(Point) (mneme.Config, error) { return mneme.Config{}, nil }}
}

func TestTPEBeatsRandomOnSmooth2D(t *testing.T) {
	f := func(pt Point) float64 {
		x, y := pt["x"].(float64), pt["y"].(float64)
		return (x-1.3)*(x-1.3) + 2*(y+2.1)*(y+2.1)
	}
	var tpeSum, rndSum float64
	const seeds, budget = 20, 60
	for seed := uint64(1); seed <= seeds; seed++ {
		sp := smoothSpace(RealRange("x", -5, 5, false), RealRange("y", -5, 5, false))
		tpeSum += optimize(NewTPE(sp, seed, DefaultTPEOptions()), sp, f, budget)
		rndSum += optimize(NewRandom(sp, seed), sp, f, budget)
	}
	t.Logf("mean best over %d seeds, %d trials: tpe %.4f, random %.4f", seeds, budget, tpeSum/seeds, rndSum/seeds)
	if tpeSum >= rndSum*0.5 {
		t.Fatalf("TPE (mean best %.4f) does not clearly beat random (%.4f)", tpeSum/seeds, rndSum/seeds)
	}
}

func TestTPEBeatsRandomOnDiscreteSpace(t *testing.T) {
	t.Parallel()
	// An integer grid with a categorical: 32*20*5 = 3200 points.
	f := func(pt Point) float64 {
		b := float64(pt["block"].(int))
		u := float64(pt["unroll"].(int))
		pen := map[string]float64{"O1": 3, "O2": 1, "O3": 0, "Os": 2, "Oz": 4}[pt["opt"].(string)]
		return math.Pow(math.Log2(b)-8, 2) + math.Pow(u-13, 2)/4 + pen
	}
	var tpeSum, rndSum float64
	const seeds, budget = 20, 80
	for seed := uint64(1); seed <= seeds; seed++ {
		sp := smoothSpace(IntRange("block", 32, 1024, 32), IntRange("unroll", 1, 20, 1), Categorical("opt", "O1", "O2", "O3", "Os", "Oz"))
		tpeSum += optimize(NewTPE(sp, seed, DefaultTPEOptions()), sp, f, budget)
		rndSum += optimize(NewRandom(sp, seed), sp, f, budget)
	}
	t.Logf("mean best over %d seeds, %d trials: tpe %.4f, random %.4f", seeds, budget, tpeSum/seeds, rndSum/seeds)
	if tpeSum >= rndSum {
		t.Fatalf("TPE (mean best %.4f) does not beat random (%.4f)", tpeSum/seeds, rndSum/seeds)
	}
}

func TestTPENeverRepeatsAndRespectsConstraints(t *testing.T) {
	s := gridSpace(t)
	want := feasibleByHand()
	tp := NewTPE(s, 3, DefaultTPEOptions())
	seen := map[string]bool{}
	for {
		pt, ok := tp.Ask()
		if !ok {
			break
		}
		k := pt.Key()
		if seen[k] || !want[k] {
			t.Fatalf("point %s: repeated %v, feasible %v", k, seen[k], want[k])
		}
		seen[k] = true
		// Odd a fails: TPE must take failures as the worst outcome and go on.
		status := mneme.StatusVerified
		if pt["a"].(int)%3 == 1 {
			status = mneme.StatusRuntimeError
		}
		tp.Tell(pt, float64(pt["a"].(int)+pt["b"].(int)), status)
	}
	if len(seen) != len(want) {
		t.Fatalf("TPE stopped after %d of %d points", len(seen), len(want))
	}
}

func TestTPEIsReproducible(t *testing.T) {
	run := func() string {
		sp := smoothSpace(RealRange("x", 0.01, 100, true), IntRange("n", 1, 64, 1))
		tp := NewTPE(sp, 11, DefaultTPEOptions())
		var out []string
		for range 30 {
			pt, _ := tp.Ask()
			tp.Tell(pt, math.Abs(math.Log(pt["x"].(float64)))+float64(pt["n"].(int)), mneme.StatusVerified)
			out = append(out, pt.Key())
		}
		return fmt.Sprint(out)
	}
	if first, second := run(), run(); first != second {
		t.Fatal("TPE with the same seed proposed different points")
	}
}

// failedStatuses are every status but verified: a trial that ends with one
// has no valid time, whatever loss it reports.
var failedStatuses = []mneme.Status{mneme.StatusInvalidLaunch, mneme.StatusInvalidConfig, mneme.StatusCompileError,
	mneme.StatusRuntimeError, mneme.StatusFailedVerification, mneme.StatusInternalError, mneme.StatusTimeout, mneme.StatusCrashed}

// TestTPECountsFailuresAsWorst tells TPE failed trials with a loss better
// than every verified one (a failed run's time is 0 or garbage): each must
// land among the worst observations, as must a verified trial with a NaN
// loss, so that TPE models them as the region to avoid.
func TestTPECountsFailuresAsWorst(t *testing.T) {
	sp := smoothSpace(IntRange("x", 0, 99, 1))
	for _, st := range append(failedStatuses, mneme.StatusVerified) {
		tpe := NewTPE(sp, 1, DefaultTPEOptions())
		for i := range 20 {
			tpe.Tell(Point{"x": i}, float64(i+1), mneme.StatusVerified)
		}
		loss := -1.0
		if st == mneme.StatusVerified {
			loss = math.NaN()
		}
		tpe.Tell(Point{"x": 50}, loss, st)
		below, above := tpe.split()
		if len(below) == 0 || len(above) == 0 {
			t.Fatalf("%s: split %d / %d", st, len(below), len(above))
		}
		for _, o := range below {
			if o.pt["x"] == 50 {
				t.Errorf("%s with loss %v: counted among the best", st, loss)
			}
		}
		if last := above[len(above)-1]; last.pt["x"] != 50 || !math.IsInf(last.loss, 1) {
			t.Errorf("%s: the failed trial is %+v, want the last observation with loss +Inf", st, last)
		}
	}
}

// TestTPEAvoidsAFailingChoice runs TPE on a space where one choice always
// fails and reports loss 0: told as the worst, TPE stops proposing it.
func TestTPEAvoidsAFailingChoice(t *testing.T) {
	sp := smoothSpace(IntRange("x", 0, 63, 1), Categorical("opt", "bad", "a", "b", "c"))
	bad := 0
	for seed := uint64(1); seed <= 5; seed++ {
		tpe := NewTPE(sp, seed, DefaultTPEOptions())
		for i := range 80 {
			pt, ok := tpe.Ask()
			if !ok {
				t.Fatal("TPE ran out of points")
			}
			x := float64(pt["x"].(int))
			if pt["opt"] == "bad" {
				tpe.Tell(pt, 0, mneme.StatusRuntimeError)
				if i >= 40 {
					bad++
				}
				continue
			}
			tpe.Tell(pt, 1+(x-20)*(x-20)/100, mneme.StatusVerified)
		}
	}
	// Uniform choice would pick "bad" 50 of these 200 times; TPE that
	// learns from the failures picks it about 30 times, and TPE that takes
	// them for the best about 100.
	if bad > 45 {
		t.Errorf("TPE proposed the always-failing choice %d of its last 40 trials over 5 seeds", bad)
	}
}

// TestRandomAndExhaustiveGoOnAfterFailures: a failed trial is not proposed
// again by random, and exhaustive still visits every point once.
func TestRandomAndExhaustiveGoOnAfterFailures(t *testing.T) {
	sp := smoothSpace(IntRange("x", 0, 19, 1))
	r := NewRandom(sp, 3)
	seen := map[string]bool{}
	for i := range 20 {
		pt, ok := r.Ask()
		if !ok {
			t.Fatalf("random stopped after %d points", i)
		}
		if seen[pt.Key()] {
			t.Fatalf("random proposed %v again", pt)
		}
		seen[pt.Key()] = true
		r.Tell(pt, 0, failedStatuses[i%len(failedStatuses)])
	}
	if pt, ok := r.Ask(); ok {
		t.Errorf("random proposed %v after covering the space", pt)
	}
	e, err := NewExhaustive(sp)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		pt, ok := e.Ask()
		if !ok {
			break
		}
		if pt["x"] != n {
			t.Fatalf("exhaustive point %d is %v", n, pt)
		}
		e.Tell(pt, math.Inf(1), mneme.StatusCrashed)
		n++
	}
	if n != 20 {
		t.Errorf("exhaustive visited %d points, want 20", n)
	}
}

// BenchmarkTPEDiscrete runs one 80-trial TPE study over a 3200-point
// integer and categorical space (the shape of a block/unroll/pipeline
// search), Ask and Tell included: once TPE converges most proposals repeat
// points already tried, which is where scoring them again used to go.
func BenchmarkTPEDiscrete(b *testing.B) {
	f := func(pt Point) float64 {
		bl, u := float64(pt["block"].(int)), float64(pt["unroll"].(int))
		return math.Pow(math.Log2(bl)-8, 2) + math.Pow(u-13, 2)/4 + map[string]float64{"O1": 3, "O2": 1, "O3": 0, "Os": 2, "Oz": 4}[pt["opt"].(string)]
	}
	for i := range b.N {
		sp := smoothSpace(IntRange("block", 32, 1024, 32), IntRange("unroll", 1, 20, 1), Categorical("opt", "O1", "O2", "O3", "Os", "Oz"))
		optimize(NewTPE(sp, uint64(i%20+1), DefaultTPEOptions()), sp, f, 80)
	}
}
