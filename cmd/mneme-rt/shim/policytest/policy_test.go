package policytest

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/deploy"
)

func parseDim(s string) ([3]uint32, error) {
	var d [3]uint32
	parts := strings.Split(s, ",")
	if len(parts) != 3 {
		return d, fmt.Errorf("%q: want X,Y,Z", s)
	}
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 10, 32)
		if err != nil {
			return d, fmt.Errorf("%q: %v", s, err)
		}
		d[i] = uint32(n)
	}
	return d, nil
}

func dim3(d [3]uint32) mneme.Dim3 { return mneme.Dim3{X: d[0], Y: d[1], Z: d[2]} }

// TestTableRunsThroughGoAndC: every row of testdata/cases.txt gives its
// answer through the Go function and the C function alike.
func TestTableRunsThroughGoAndC(t *testing.T) {
	f, err := os.Open("testdata/cases.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	rows := map[string]int{}
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		in, want, ok := strings.Cut(text, " -> ")
		if !ok {
			t.Fatalf("cases.txt:%d: no \" -> \"", line)
		}
		fields := strings.Fields(in)
		rows[fields[0]]++
		switch fields[0] {
		case "geometry":
			checkGeometry(t, line, fields[1:], strings.Fields(want))
		case "key":
			checkKey(t, line, fields[1:], strings.TrimSpace(want))
		default:
			t.Fatalf("cases.txt:%d: unknown case %q", line, fields[0])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if rows["geometry"] < 10 || rows["key"] < 4 {
		t.Errorf("the table holds %v rows; it no longer checks what it claims", rows)
	}
}

func checkGeometry(t *testing.T, line int, in, want []string) {
	t.Helper()
	if len(in) != 4 || len(want) != 2 {
		t.Fatalf("cases.txt:%d: want geometry TUNED RECORDED GRID BLOCK -> GRID BLOCK", line)
	}
	var d [6][3]uint32
	for i, s := range append(in, want...) {
		v, err := parseDim(s)
		if err != nil {
			t.Fatalf("cases.txt:%d: %v", line, err)
		}
		d[i] = v
	}
	tuned, recorded, grid, block, wantGrid, wantBlock := d[0], d[1], d[2], d[3], d[4], d[5]
	p := &deploy.Plan{TunedBlock: dim3(tuned), RecordedBlock: dim3(recorded)}
	gg, gb := p.Geometry(dim3(grid), dim3(block))
	if gg != dim3(wantGrid) || gb != dim3(wantBlock) {
		t.Errorf("cases.txt:%d: Go gives %v x %v, want %v x %v", line, gg, gb, dim3(wantGrid), dim3(wantBlock))
	}
	out, changed := cGeometry(tuned, recorded, grid, block)
	cg, cb := mneme.Dim3{X: out[0], Y: out[1], Z: out[2]}, mneme.Dim3{X: out[3], Y: out[4], Z: out[5]}
	if cg != dim3(wantGrid) || cb != dim3(wantBlock) {
		t.Errorf("cases.txt:%d: C gives %v x %v, want %v x %v", line, cg, cb, dim3(wantGrid), dim3(wantBlock))
	}
	if changed != (cg != dim3(grid) || cb != dim3(block)) {
		t.Errorf("cases.txt:%d: C says changed=%v for %v x %v -> %v x %v", line, changed, dim3(grid), dim3(block), cg, cb)
	}
}

func checkKey(t *testing.T, line int, in []string, want string) {
	t.Helper()
	if len(in) != 4 && len(in) != 5 {
		t.Fatalf("cases.txt:%d: want key DIMS GRID BLOCK FOLDED [SHARED] -> KEY", line)
	}
	var shared uint64
	sharedKeyed := len(in) == 5
	if sharedKeyed {
		var err error
		if shared, err = strconv.ParseUint(in[4], 10, 32); err != nil {
			t.Fatalf("cases.txt:%d: SHARED: %v", line, err)
		}
	}
	grid, err1 := parseDim(in[1])
	block, err2 := parseDim(in[2])
	if err1 != nil || err2 != nil || (in[0] != "0" && in[0] != "1") {
		t.Fatalf("cases.txt:%d: %v %v (DIMS must be 0 or 1)", line, err1, err2)
	}
	var folded [][]byte
	if in[3] != "-" {
		for _, h := range strings.Split(in[3], ",") {
			b, err := hex.DecodeString(h)
			if err != nil {
				t.Fatalf("cases.txt:%d: %v", line, err)
			}
			folded = append(folded, b)
		}
	}
	wantKey, err := hex.DecodeString(want)
	if err != nil {
		t.Fatalf("cases.txt:%d: %v", line, err)
	}
	dims := in[0] == "1"
	if got := deploy.VariantLaunchKey(nil, dim3(grid), dim3(block), dims, sharedKeyed, uint32(shared), folded); !bytes.Equal(got, wantKey) {
		t.Errorf("cases.txt:%d: Go key %x, want %x", line, got, wantKey)
	}
	got, ok := cVariantKey(dims, sharedKeyed, grid, block, uint32(shared), folded)
	if !ok || !bytes.Equal(got, wantKey) {
		t.Errorf("cases.txt:%d: C key %x (ok %v), want %x", line, got, ok, wantKey)
	}
}

// TestLimitsAreTheHeaders: package deploy's limits are deploy_policy.h's.
func TestLimitsAreTheHeaders(t *testing.T) {
	h := headerLimits()
	d := deploy.DefaultLimits
	for _, c := range []struct {
		name    string
		goV, cV uint64
	}{
		{"MNEME_DEPLOY_MAX_THREADS", deploy.MaxThreadsPerBlock, h.MaxThreads},
		{"MNEME_DEPLOY_MAX_GRID_X", deploy.MaxGridX, h.MaxGridX},
		{"MNEME_DEPLOY_MAX_GRID_YZ", deploy.MaxGridYZ, h.MaxGridYZ},
		{"MNEME_DEPLOY_MAX_FOLDED", uint64(d.MaxFolded), uint64(h.MaxFolded)},
		{"MNEME_DEPLOY_MAX_KEYED_ARG", uint64(d.MaxKeyedArg), uint64(h.MaxKeyedArg)},
		{"MNEME_DEPLOY_MAX_KEYS", uint64(d.MaxKeys), uint64(h.MaxKeys)},
		{"MNEME_DEPLOY_DEFAULT_SHARED", uint64(d.DefaultShared), uint64(h.DefaultShared)},
	} {
		if c.goV != c.cV {
			t.Errorf("%s: deploy has %d, the header %d", c.name, c.goV, c.cV)
		}
	}
}
