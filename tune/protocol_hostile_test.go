package tune

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme"
)

// nullSession answers every request without work.
type nullSession struct{}

func (nullSession) Open(OpenParams) (OpenInfo, error) { return OpenInfo{Kernel: "k"}, nil }
func (nullSession) Compile(mneme.Config) mneme.Result { return mneme.Result{} }
func (nullSession) Run(mneme.Config) mneme.Result     { return mneme.Result{} }
func (nullSession) Close() error                      { return nil }

// serveLines runs Serve over input and returns its answers.
func serveLines(t *testing.T, input string) []Response {
	t.Helper()
	var out bytes.Buffer
	if err := Serve(strings.NewReader(input), &out, nullSession{}); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	var resps []Response
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var r Response
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("answer %q: %v", sc.Text(), err)
		}
		resps = append(resps, r)
	}
	return resps
}

func TestServeAnswersHostileLines(t *testing.T) {
	long := `{"id":1,"op":"compile","config":{"passes":"` + strings.Repeat("x", maxLine) + `"}}`
	resps := serveLines(t, long+"\n"+`{"id":2,"op":"close"}`+"\n")
	if len(resps) != 2 || resps[0].OK || !strings.Contains(resps[0].Error, "longer than the limit") || !resps[1].OK || resps[1].ID != 2 {
		t.Fatalf("oversized line: %+v", resps)
	}
	// The same without a newline at the end of input.
	resps = serveLines(t, long)
	if len(resps) != 1 || !strings.Contains(resps[0].Error, "longer than the limit") {
		t.Fatalf("oversized last line: %+v", resps)
	}
	resps = serveLines(t, `{"id":3,"op":"close","op":"open"}`+"\n")
	if len(resps) != 1 || resps[0].OK || !strings.Contains(resps[0].Error, "op: the key appears twice") {
		t.Fatalf("duplicate key: %+v", resps)
	}
}

// FuzzServe feeds arbitrary request streams to the protocol: every line gets
// an answer that is JSON, and nothing panics.
func FuzzServe(f *testing.F) {
	f.Add([]byte(`{"id":1,"op":"open","open":{"db":"d","iterations":1}}` + "\n" + `{"id":2,"op":"run","config":{}}` + "\n"))
	f.Add([]byte(`{"id":1,"op":"compile"}` + "\n" + `not json` + "\n"))
	f.Add([]byte(`{"id":1,"op":"close","id":2}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var out bytes.Buffer
		_ = Serve(bytes.NewReader(data), &out, nullSession{})
		sc := bufio.NewScanner(&out)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			if !json.Valid(sc.Bytes()) {
				t.Fatalf("answer is not JSON: %q", sc.Text())
			}
		}
	})
}

func TestCheckWorkersBoundsByTheMachine(t *testing.T) {
	if err := CheckWorkers(1, 1, -1); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		workers, gpus, compile int
		want                   string
	}{
		{100000, 1, -1, "--workers 100000"},
		{0, 1, -1, "--workers 0"},
		{1, 1, 100000, "--compile-workers 100000"},
	} {
		err := CheckWorkers(c.workers, c.gpus, c.compile)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %s", c, err, c.want)
		}
	}
}

func TestServeLineLimitIsExactAndEveryLineIsAnswered(t *testing.T) {
	req := `{"id":7,"op":"close"}`
	exact := req + strings.Repeat(" ", maxLine-len(req))
	if resps := serveLines(t, exact+"\n"); len(resps) != 1 || !resps[0].OK || resps[0].ID != 7 {
		t.Fatalf("a line of exactly %d bytes: %+v", maxLine, resps)
	}
	if resps := serveLines(t, exact+" \n"); len(resps) != 1 || !strings.Contains(resps[0].Error, "longer than the limit") {
		t.Fatalf("a line one byte over: %+v", resps)
	}
	// A last request without its newline is answered too.
	if resps := serveLines(t, req); len(resps) != 1 || !resps[0].OK {
		t.Fatalf("a last line without a newline: %+v", resps)
	}
	// A malformed request is answered and the session goes on.
	resps := serveLines(t, "not json\n"+req+"\n")
	if len(resps) != 2 || resps[0].OK || !strings.Contains(resps[0].Error, "malformed request") || !resps[1].OK || resps[1].ID != 7 {
		t.Fatalf("a malformed request, then a good one: %+v", resps)
	}
}

func TestTrialOKNeedsAVerifiedTime(t *testing.T) {
	for _, c := range []struct {
		tr   Trial
		want bool
	}{
		{Trial{Status: mneme.StatusVerified, TimeNS: 1}, true},
		{Trial{Status: mneme.StatusVerified, TimeNS: 0}, false},
		{Trial{Status: mneme.StatusFailedVerification, TimeNS: 5}, false},
	} {
		if c.tr.OK() != c.want {
			t.Errorf("%+v: OK %v, want %v", c.tr, !c.want, c.want)
		}
	}
	if canonicalSampler("grid") != "exhaustive" || canonicalSampler("tpe") != "tpe" {
		t.Error("the sampler alias grid is not exhaustive")
	}
}
