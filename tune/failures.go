package tune

import (
	"fmt"
	"maps"
	"slices"

	"github.com/mneme-gpu/mneme"
)

// Which knob a run's failed trials share. A run whose trials fail half the
// time spends half its budget on configurations that cannot be kept; when
// one value of one parameter accounts for the failures (folding the
// arguments changes a float kernel's results beyond the verification
// bounds, say, or a pipeline miscompiles), the summary names it, so the
// user can leave that value out (a config file's space) or widen the
// verification, instead of reading trial lines.

// failurePatternMin is the fewest trials with a value for it to be named:
// one or two failures of a value say little.
const failurePatternMin = 3

// failureOtherMax is the largest failure rate the other values of the
// parameter may have for the value to be named as the failures' cause.
const failureOtherMax = 0.25

// FailurePattern names the parameter value every trial with which failed,
// when the trials with the parameter's other values mostly did not: "every
// trial with specialize=true failed (20 of 20: failed_verification 20);
// with other values 0 of 21 failed". "" when no value explains the
// failures. The baseline trial is not counted.
func FailurePattern(trials []Trial) string {
	type tally struct {
		n, failed int
		statuses  map[mneme.Status]int
		apart     deviation
	}
	byParam := map[string]map[string]*tally{}
	totalFailed := 0
	for _, t := range trials {
		if t.IsBaseline() {
			continue
		}
		failed := t.Status != mneme.StatusVerified
		if failed {
			totalFailed++
		}
		for name, v := range t.Params {
			vals := byParam[name]
			if vals == nil {
				vals = map[string]*tally{}
				byParam[name] = vals
			}
			key := fmt.Sprint(v)
			tl := vals[key]
			if tl == nil {
				tl = &tally{statuses: map[mneme.Status]int{}}
				vals[key] = tl
			}
			tl.n++
			if failed {
				tl.failed++
				tl.statuses[t.Status]++
				tl.apart.add(t.Result)
			}
		}
	}
	if totalFailed == 0 {
		return ""
	}
	type candidate struct {
		param, value       string
		t                  *tally
		otherN, otherFails int
	}
	var best *candidate
	for _, name := range slices.Sorted(maps.Keys(byParam)) {
		vals := byParam[name]
		if len(vals) < 2 {
			continue
		}
		for _, v := range slices.Sorted(maps.Keys(vals)) {
			tl := vals[v]
			if tl.n < failurePatternMin || tl.failed != tl.n {
				continue
			}
			c := candidate{param: name, value: v, t: tl}
			for w, other := range vals {
				if w != v {
					c.otherN += other.n
					c.otherFails += other.failed
				}
			}
			if c.otherN == 0 || float64(c.otherFails) > failureOtherMax*float64(c.otherN) {
				continue
			}
			if best == nil || c.t.failed > best.t.failed {
				best = &c
			}
		}
	}
	if best == nil {
		return ""
	}
	return fmt.Sprintf("every trial with %s=%s failed (%d of %d: %s); with other values %d of %d failed",
		best.param, best.value, best.t.failed, best.t.n, fmtStatuses(best.t.statuses), best.otherFails, best.otherN) + best.t.apart.String()
}

// deviation is how far the float outputs of failed verifications were
// from the recording's, at most: what a wider bound (--verify ulp N, or
// tolerance) would have to admit for those trials to pass.
type deviation struct {
	buffers int // typed buffers that failed their bound
	maxULP  uint64
	maxRel  float64
}

func (d *deviation) add(r *mneme.Result) {
	if r == nil || r.Status != mneme.StatusFailedVerification {
		return
	}
	for _, b := range r.Verification {
		if b.Passed || b.Type == "" || b.Type == "untyped" || b.NonFinite > 0 {
			continue
		}
		d.buffers++
		d.maxULP = max(d.maxULP, b.MaxULP)
		d.maxRel = max(d.maxRel, b.MaxRel)
	}
}

func (d deviation) String() string {
	if d.buffers == 0 {
		return ""
	}
	return fmt.Sprintf("; their float outputs were at most %d ulp (relative %.2g) from the recording's", d.maxULP, d.maxRel)
}
