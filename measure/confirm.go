package measure

import (
	"context"
	"fmt"
	"math"
	"time"
)

// Confirmation is the end-to-end measurement of a kept set as the
// application will run it: no launch statistics (the untuned runs load no
// runtime library at all, the tuned ones load it to run the kept kernels),
// untuned and tuned runs interleaved in pairs, more pairs while the
// difference of their medians is not yet known to within the precision
// asked.
type Confirmation struct {
	Untuned, Tuned []Outcome
	// Noise is the 95% half-width of the difference of the wall times'
	// medians, relative to the untuned median; OwnNoise the same of the
	// application's own timer (0 without one).
	Noise, OwnNoise float64
}

// Confirmation defaults: the most pairs (a multiple of Options.Runs), the
// precision sought, and how long extra pairs may take in all.
const (
	defaultPairsPerRun = 4
	defaultPrecision   = 0.02
	defaultConfirmFor  = 2 * time.Minute
	// minSlower is the least slowdown a confirmation calls slower, however
	// precise: below it the tuned and untuned runs are the same.
	minSlower = 0.01
)

// confirm runs the confirmation of the tuned file: Runs pairs, then more
// (up to MaxPairs) while the medians' difference is less precise than
// Precision and the runs so far took less than ConfirmFor. A tuned run
// that fails or (with CheckOutput) prints differently ends it: why says so.
func confirm(ctx context.Context, r Runner, tuned string, opts Options) (c *Confirmation, why string, err error) {
	maxPairs := opts.MaxPairs
	if maxPairs <= 0 {
		maxPairs = defaultPairsPerRun * opts.Runs
	}
	precision := opts.Precision
	if precision <= 0 {
		precision = defaultPrecision
	}
	budget := opts.ConfirmFor
	if budget <= 0 {
		budget = defaultConfirmFor
	}
	c = &Confirmation{}
	spent := 0.0
	noStats := EnvLaunchStats + "="
	for i := 0; i < maxPairs; i++ {
		if i >= opts.Runs && (spent >= budget.Seconds() || (c.Noise <= precision && c.OwnNoise <= precision)) {
			break
		}
		// Alternating which goes first, as measureRound does.
		order := []bool{false, true}
		if i%2 == 1 {
			order = []bool{true, false}
		}
		for _, tunedRun := range order {
			env := []string{EnvTunedKernels + "=", noStats}
			if tunedRun {
				env[0] = EnvTunedKernels + "=" + tuned
			}
			out, err := r.Run(ctx, env)
			if err != nil {
				return nil, "", err
			}
			spent += out.Seconds
			if !tunedRun {
				if out.ExitCode != 0 {
					return nil, "", fmt.Errorf("%w (exit code %d)", ErrUntunedFails, out.ExitCode)
				}
				c.Untuned = append(c.Untuned, out)
				continue
			}
			if why := differs(out, c.Untuned, opts.CheckOutput); why != "" {
				return c, "the application " + why + " with the kept kernels, run without launch statistics", nil
			}
			c.Tuned = append(c.Tuned, out)
		}
		c.Noise = medianDifferenceNoise(Seconds(c.Untuned), Seconds(c.Tuned))
		c.OwnNoise = medianDifferenceNoise(OwnTimes(c.Untuned), OwnTimes(c.Tuned))
	}
	return c, "", nil
}

// slower says why a confirmation counts the tuned application as slower:
// its median wall time, or its own timer's, above the untuned median by
// more than the confirmation's noise (and at least minSlower); "" when
// not.
func (c *Confirmation) slower() string {
	runs := len(c.Tuned)
	if mu, mt := median(Seconds(c.Untuned)), median(Seconds(c.Tuned)); mu > 0 && mt > mu*(1+math.Max(c.Noise, minSlower)) {
		return fmt.Sprintf("the application ran slower tuned end to end (%.3f s against %.3f s untuned, medians of %d runs each without launch statistics; noise %.1f%%)", mt, mu, runs, 100*c.Noise)
	}
	u, t := OwnTimes(c.Untuned), OwnTimes(c.Tuned)
	if len(u) == 0 || len(t) == 0 {
		return ""
	}
	if mu, mt := median(u), median(t); mu > 0 && mt > mu*(1+math.Max(c.OwnNoise, minSlower)) {
		return fmt.Sprintf("the application's own timer says it ran slower tuned (%.4g against %.4g untuned, in its units, medians of %d runs each without launch statistics; noise %.1f%%)", mt, mu, runs, 100*c.OwnNoise)
	}
	return ""
}

// medianDifferenceNoise is the 95% half-width of median(t) - median(u)
// relative to median(u), each median's standard error estimated from its
// runs' median absolute deviation (robust to the odd slow run: a process
// start that waited on the driver); 0 without two runs of each, +Inf when
// the untuned median is not positive.
func medianDifferenceNoise(u, t []float64) float64 {
	if len(u) < 2 || len(t) < 2 {
		return 0
	}
	mu := median(u)
	if mu <= 0 {
		return math.Inf(1)
	}
	se := func(xs []float64) float64 {
		m := median(xs)
		dev := make([]float64, len(xs))
		for i, x := range xs {
			dev[i] = math.Abs(x - m)
		}
		// 1.4826 MAD estimates a normal spread's sigma; the median of n
		// draws varies by about 1.2533 sigma / sqrt(n).
		return 1.2533 * 1.4826 * median(dev) / math.Sqrt(float64(len(xs)))
	}
	su, st := se(u), se(t)
	return 1.96 * math.Sqrt(su*su+st*st) / mu
}
