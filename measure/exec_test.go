package measure

import (
	"bytes"
	"context"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/zeebo/xxh3"
)

// timerLine matches the timing lines of the outputs below.
var timerLine = regexp.MustCompile(`time *: [0-9.]+ msec`)

// hashOf writes out to a hashingWriter with filter in the given pieces and
// returns the hash.
func hashOf(filter *regexp.Regexp, pieces ...string) uint64 {
	w := &hashingWriter{h: xxh3.New(), filter: filter}
	for _, p := range pieces {
		w.Write([]byte(p))
	}
	return w.Sum64()
}

func TestOutputFilterIgnoresOnlyTheLinesItMatches(t *testing.T) {
	base := "options: 8000000\nkernel time : 0.125 msec\nL1 norm: 1.0E-07\nTest passed\n"
	otherTime := strings.Replace(base, "0.125", "0.093", 1)
	otherResult := strings.Replace(base, "1.0E-07", "2.0E-07", 1)
	if hashOf(timerLine, base) != hashOf(timerLine, otherTime) {
		t.Error("outputs differing only in a filtered line hash differently")
	}
	if hashOf(timerLine, base) == hashOf(timerLine, otherResult) {
		t.Error("outputs differing in an unfiltered line hash the same")
	}
	if hashOf(nil, base) == hashOf(nil, otherTime) {
		t.Error("without a filter, a changed timing line went unnoticed")
	}
	// A filtered line leaves nothing behind, its newline included.
	if hashOf(timerLine, "a\ntime : 1 msec\nc\n") != hashOf(nil, "a\nc\n") {
		t.Error("a filtered line left something behind in the hash")
	}
}

func TestOutputFilterSeesLinesWhereverWritesSplitThem(t *testing.T) {
	whole := hashOf(timerLine, "x\nkernel time : 0.5 msec\ny\n")
	split := hashOf(timerLine, "x\nkernel ti", "me : 0.", "5 msec", "\ny", "\n")
	if whole != split {
		t.Error("a timing line split over writes was not filtered as one line")
	}
	// The last line without a newline counts, and is filtered too.
	if hashOf(timerLine, "x\ny") == hashOf(timerLine, "x\n") {
		t.Error("a last line without its newline was left out")
	}
	if hashOf(timerLine, "x\ntime : 3 msec") != hashOf(timerLine, "x\n") {
		t.Error("a last timing line without its newline was not filtered")
	}
}

func TestAFilterMatchingNothingHashesAsNoFilter(t *testing.T) {
	out := "first\nsecond\nno newline at the end"
	nothing := regexp.MustCompile(`^never$`)
	if hashOf(nothing, out) != hashOf(nil, out) {
		t.Error("a filter that matches no line changed the hash")
	}
}

func TestAnOverlongLineIsHashedWhole(t *testing.T) {
	long := strings.Repeat("z", maxFilteredLine+10)
	// The filter would match the long line, but the writer cannot hold it:
	// it is hashed as it comes, and what follows it is filtered again.
	matchAll := regexp.MustCompile(`z|time`)
	got := hashOf(matchAll, "a\n", long[:100], long[100:], "\ntime : 1 msec\nb\n")
	if want := hashOf(nil, "a\n"+long+"\nb\n"); got != want {
		t.Error("an overlong line was not hashed whole, or the line after it was not filtered")
	}
	w := &hashingWriter{h: xxh3.New(), filter: matchAll}
	w.Write([]byte(long))
	if len(w.line) > maxFilteredLine {
		t.Errorf("the writer holds %d bytes of one line, more than %d", len(w.line), maxFilteredLine)
	}
}

func TestExecRunnerComparesOnlyUnfilteredLines(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	run := func(filter *regexp.Regexp, script string) Outcome {
		t.Helper()
		r := &ExecRunner{App: sh, Args: []string{"-c", script}, StatsDir: t.TempDir(), OutputFilter: filter}
		o, err := r.Run(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	a := run(timerLine, `echo start; echo "kernel time : 0.1 msec"; echo done`)
	b := run(timerLine, `echo start; echo "kernel time : 0.2 msec"; echo done`)
	c := run(timerLine, `echo start; echo "kernel time : 0.1 msec"; echo DONE`)
	if a.OutputHash != b.OutputHash {
		t.Error("runs differing only in the timing line count as different outputs")
	}
	if a.OutputHash == c.OutputHash {
		t.Error("runs differing in a result line count as the same output")
	}
	if !bytes.Contains(b.Output, []byte("0.2 msec")) {
		t.Errorf("the kept output should hold every line, filtered ones too; got %q", b.Output)
	}
	plainA := run(nil, `echo start; echo "kernel time : 0.1 msec"; echo done`)
	plainB := run(nil, `echo start; echo "kernel time : 0.2 msec"; echo done`)
	if plainA.OutputHash == plainB.OutputHash {
		t.Error("without a filter, runs with different timing lines count as the same output")
	}
}

// FuzzOutputFilterSplit checks that where the writes split the output
// never changes the filtered hash.
func FuzzOutputFilterSplit(f *testing.F) {
	f.Add([]byte("a\ntime : 1 msec\nb"), uint8(3))
	f.Add([]byte("\n\n\ntime : 2 msec\n"), uint8(1))
	f.Add([]byte("no newline"), uint8(0))
	f.Fuzz(func(t *testing.T, out []byte, step uint8) {
		whole := hashOf(timerLine, string(out))
		n := int(step%17) + 1
		var pieces []string
		for i := 0; i < len(out); i += n {
			pieces = append(pieces, string(out[i:min(i+n, len(out))]))
		}
		if got := hashOf(timerLine, pieces...); got != whole {
			t.Fatalf("pieces of %d bytes hash to %x, the whole output to %x", n, got, whole)
		}
	})
}

// The application's own timer is the number in the last line, of standard
// output or error, that the expression matches; a line without a number
// the group accepts counts as none, and without a match the time is 0.
func TestExecRunnerReadsTheApplicationsOwnTimer(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	timer := regexp.MustCompile(`wall time: ([0-9.]+) ms`)
	for _, tc := range []struct {
		script string
		want   float64
	}{
		{`echo "wall time: 12.5 ms" >&2`, 12.5},
		{`echo "wall time: 12.5 ms"`, 12.5},
		{`echo "wall time: 3 ms"; echo "wall time: 4 ms" >&2`, 4},
		{`echo "wall time: 3 ms" >&2; echo "wall time: 4 ms" >&2`, 4},
		{`echo "wall time: . ms" >&2`, 0},
		{`echo "wall time: 0 ms" >&2`, 0},
		{`echo "elapsed: 12 ms" >&2`, 0},
	} {
		var stderr bytes.Buffer
		r := &ExecRunner{App: sh, Args: []string{"-c", tc.script}, StatsDir: t.TempDir(), Stderr: &stderr, OwnTimer: timer}
		o, err := r.Run(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if o.OwnTime != tc.want {
			t.Errorf("%s: own time %v, want %v", tc.script, o.OwnTime, tc.want)
		}
		// The application's standard error still reaches the runner's.
		if strings.Contains(tc.script, ">&2") && stderr.Len() == 0 {
			t.Errorf("%s: standard error was not passed on", tc.script)
		}
	}
	// Without an expression nothing is read.
	r := &ExecRunner{App: sh, Args: []string{"-c", `echo "wall time: 12.5 ms" >&2`}, StatsDir: t.TempDir()}
	if o, err := r.Run(context.Background(), nil); err != nil || o.OwnTime != 0 {
		t.Errorf("without --own-timer: own time %v (%v), want 0", o.OwnTime, err)
	}
}
