package llvmir

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/mneme-gpu/mneme/appabi"
	"github.com/mneme-gpu/mneme/db"
	"github.com/mneme-gpu/mneme/llvm"
	"github.com/mneme-gpu/mneme/record"
)

// embedded is a load function returning fixed entries, as
// appabi.ExecutableIR returns an executable's mneme_ir section.
func embedded(entries ...appabi.IREntry) func() ([]appabi.IREntry, error) {
	return func() ([]appabi.IREntry, error) { return entries, nil }
}

// sameAnswer asserts that the prefetched tools answer exactly as Tools does.
func sameAnswer(t *testing.T, p *Prefetched, bitcode []byte, moduleName, kernel string) {
	t.Helper()
	want, wantDefined, wantErr := Tools{}.ExtractKernel(bitcode, moduleName, kernel)
	got, gotDefined, gotErr := p.ExtractKernel(bitcode, moduleName, kernel)
	if gotDefined != wantDefined || (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("%s in %s: defined=%v err=%v, uncached defined=%v err=%v", kernel, moduleName, gotDefined, gotErr, wantDefined, wantErr)
	}
	if wantErr != nil && gotErr.Error() != wantErr.Error() {
		t.Errorf("%s in %s: error %q, uncached %q", kernel, moduleName, gotErr, wantErr)
	}
	if want == nil || got == nil {
		if want != got {
			t.Errorf("%s in %s: IR %v, uncached %v", kernel, moduleName, got, want)
		}
		return
	}
	if !bytes.Equal(got.Bitcode, want.Bitcode) {
		t.Errorf("%s in %s: %d bytes of bitcode differ from the uncached %d", kernel, moduleName, len(got.Bitcode), len(want.Bitcode))
	}
	if !slices.Equal(got.ArgNames, want.ArgNames) || !slices.Equal(got.ArgKinds, want.ArgKinds) {
		t.Errorf("%s in %s: args %v %v, uncached %v %v", kernel, moduleName, got.ArgNames, got.ArgKinds, want.ArgNames, want.ArgKinds)
	}
}

func TestPrefetchedAnswersAsToolsDo(t *testing.T) {
	kernels := deviceBitcode(t, "testdata/kernels.cu")
	other := deviceBitcode(t, "testdata/other.cu")
	p := Prefetch(embedded(
		appabi.IREntry{Name: "kernels.cu", Bitcode: kernels},
		appabi.IREntry{Name: "other.cu", Bitcode: other},
	))
	defer p.Close()

	// The recorded file has another name than the embedded entry; the
	// answer must not depend on it.
	for _, k := range []string{saxpy, "_Z5otherPi4Pairb", "_Z7missingv"} {
		sameAnswer(t, p, kernels, "RecordedIR_0123.bc", k)
	}
	sameAnswer(t, p, other, "RecordedIR_4567.bc", "_Z9unrelatedPi")
	sameAnswer(t, p, other, "RecordedIR_4567.bc", saxpy)
	if s := p.Stats(); s.Hits != 5 || s.Computed != 0 || s.Units != 2 || s.Analyzed != 2 {
		t.Errorf("stats %+v: want 5 answers from 2 analyzed units and none computed", s)
	}

	// Changing what was handed out does not change later answers.
	ir, _, _ := p.ExtractKernel(kernels, "k.bc", saxpy)
	ir.Bitcode[len(ir.Bitcode)-1] ^= 0xff
	ir.ArgKinds[0] = "changed"
	sameAnswer(t, p, kernels, "k.bc", saxpy)
}

func TestPrefetchedAnalyzesUnknownBytes(t *testing.T) {
	kernels := deviceBitcode(t, "testdata/kernels.cu")
	other := deviceBitcode(t, "testdata/other.cu")
	p := Prefetch(embedded(appabi.IREntry{Name: "other.cu", Bitcode: other}))
	defer p.Close()
	sameAnswer(t, p, kernels, "RecordedIR_0123.bc", saxpy)
	ir, defined, err := p.ExtractKernel(kernels, "RecordedIR_0123.bc", saxpy)
	if err != nil || !defined || len(ir.ArgKinds) != 4 {
		t.Fatalf("a unit not embedded was not analyzed: defined=%v err=%v ir=%v", defined, err, ir)
	}
	// A unit whose bytes differ from an embedded one by one byte, and not
	// bitcode any more, gets Tools's own error.
	junk := slices.Clone(other)
	junk[0] = 'X'
	sameAnswer(t, p, junk, "RecordedIR_89ab.bc", "_Z9unrelatedPi")
	if s := p.Stats(); s.Computed != 3 || s.Hits != 0 {
		t.Errorf("stats %+v: want 3 computed, no hits", s)
	}
}

func TestPrefetchedSurvivesBadEmbeddedIR(t *testing.T) {
	kernels := deviceBitcode(t, "testdata/kernels.cu")
	notBitcode := []byte("BC\xc0\xde but not really bitcode")
	loadErr := errors.New("section truncated")
	p := Prefetch(func() ([]appabi.IREntry, error) {
		return []appabi.IREntry{{Name: "bad.cu", Bitcode: notBitcode}, {Name: "kernels.cu", Bitcode: kernels}}, loadErr
	})
	defer p.Close()
	// The unit that failed to parse is analyzed again on the spot, giving
	// the same error; the good one is still answered from the prefetch.
	sameAnswer(t, p, notBitcode, "RecordedIR_bad.bc", saxpy)
	sameAnswer(t, p, kernels, "RecordedIR_good.bc", saxpy)
	if s := p.Stats(); s.Computed != 1 || s.Hits != 1 {
		t.Errorf("stats %+v: want 1 computed, 1 hit", s)
	}
	if entries, err := p.Entries(); len(entries) != 2 || !errors.Is(err, loadErr) {
		t.Errorf("Entries: %d entries, err %v; want what load returned", len(entries), err)
	}

	// A load that panics loses the prefetch, not the answers.
	panicking := Prefetch(func() ([]appabi.IREntry, error) { panic("corrupt ELF") })
	defer panicking.Close()
	sameAnswer(t, panicking, kernels, "RecordedIR_good.bc", saxpy)
	if _, err := panicking.Entries(); err == nil {
		t.Error("a panicking load reported no error")
	}
}

func TestPrefetchedClosedEarlyStillAnswers(t *testing.T) {
	kernels := deviceBitcode(t, "testdata/kernels.cu")
	other := deviceBitcode(t, "testdata/other.cu")
	p := Prefetch(embedded(
		appabi.IREntry{Name: "kernels.cu", Bitcode: kernels},
		appabi.IREntry{Name: "other.cu", Bitcode: other},
	))
	p.Close()
	p.Close()
	// Concurrent callers on units the background may not have reached:
	// each unit is analyzed once and everyone gets the same answer.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			sameAnswer(t, p, kernels, "a.bc", saxpy)
			sameAnswer(t, p, other, "b.bc", "_Z9unrelatedPi")
		})
	}
	wg.Wait()
	if s := p.Stats(); s.Analyzed != 2 || s.Hits != 8 || s.Computed != 0 {
		t.Errorf("stats %+v: want both units analyzed once and 8 hits", s)
	}
}

// TestFinalizeWithPrefetchMatchesFinalize records the same launch twice and
// finalizes one database with Tools and the other with the prefetch: every
// file must come out byte for byte the same.
func TestFinalizeWithPrefetchMatchesFinalize(t *testing.T) {
	tu := deviceBitcode(t, "testdata/kernels.cu")
	other := deviceBitcode(t, "testdata/other.cu")
	plain := recordSaxpy(t, tu)
	prefetched := recordSaxpy(t, tu)

	p := Prefetch(embedded(appabi.IREntry{Name: "other.cu", Bitcode: other}, appabi.IREntry{Name: "kernels.cu", Bitcode: tu}))
	defer p.Close()
	for _, r := range record.Finalize(plain, Tools{}, nil) {
		if r.Err != nil {
			t.Fatalf("finalize with Tools: %v", r.Err)
		}
	}
	for _, r := range record.Finalize(prefetched, p, p.Entries) {
		if r.Err != nil {
			t.Fatalf("finalize with the prefetch: %v", r.Err)
		}
	}
	if s := p.Stats(); s.Hits != 1 || s.Computed != 0 {
		t.Errorf("stats %+v: the recorded unit was not answered from the prefetch", s)
	}
	files, err := os.ReadDir(plain)
	if err != nil {
		t.Fatal(err)
	}
	compared := 0
	for _, f := range files {
		want, err := os.ReadFile(filepath.Join(plain, f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(prefetched, f.Name()))
		if err != nil {
			t.Fatalf("%s: only in the database finalized without prefetch: %v", f.Name(), err)
		}
		switch filepath.Ext(f.Name()) {
		case ".json":
			// The two recordings differ in when they were made, nothing else.
			want, got = kernelFileWithoutTimes(t, want), kernelFileWithoutTimes(t, got)
		case ".bc":
		default:
			continue
		}
		compared++
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs between the two finalizations:\n%s\n%s", f.Name(), want, got)
		}
	}
	if compared < 2 {
		t.Errorf("compared %d IR and kernel files, want at least 2", compared)
	}
	// And the prefetched IR is the kernel, extracted.
	bc, _ := filepath.Glob(filepath.Join(prefetched, "RecordedIR_*.bc"))
	data, err := os.ReadFile(bc[0])
	if err != nil {
		t.Fatal(err)
	}
	m, err := llvm.ParseBitcode(data, bc[0])
	if err != nil {
		t.Fatal(err)
	}
	defer m.Dispose()
	if got := m.Kernels(); !slices.Equal(got, []string{saxpy}) {
		t.Errorf("finalized IR defines %v", got)
	}
}

// kernelFileWithoutTimes re-encodes a kernel file with its instances'
// recording times cleared.
func kernelFileWithoutTimes(t *testing.T, data []byte) []byte {
	t.Helper()
	k, err := db.ParseKernel("kernel file", data)
	if err != nil {
		t.Fatal(err)
	}
	for _, inst := range k.Instances {
		inst.RecordedAt = ""
	}
	out, err := db.MarshalKernel(k)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFinalizeWithPrefetchFallsBack: when the recorded unit defines no such
// kernel, Finalize's fallback search of the embedded units goes through the
// prefetch too and reuses its entries.
func TestFinalizeWithPrefetchFallsBack(t *testing.T) {
	wrong := deviceBitcode(t, "testdata/other.cu")
	right := deviceBitcode(t, "testdata/kernels.cu")
	dir := recordSaxpy(t, wrong)
	p := Prefetch(embedded(appabi.IREntry{Name: "other.cu", Bitcode: wrong}, appabi.IREntry{Name: "kernels.cu", Bitcode: right}))
	defer p.Close()
	res := record.Finalize(dir, p, p.Entries)
	if len(res) != 1 || res[0].Err != nil {
		t.Fatalf("finalize: %+v", res)
	}
	if s := p.Stats(); s.Hits != 3 || s.Computed != 0 {
		t.Errorf("stats %+v: want the recorded unit and both embedded units answered from the prefetch", s)
	}
}

// BenchmarkFinalizeLookup compares answering one recorded kernel from the
// prefetch (after the background analysis ran) with analyzing it directly,
// the time `mneme record` spends after the application exits.
func BenchmarkFinalizeLookup(b *testing.B) {
	tu := deviceBitcode(b, "testdata/kernels.cu")
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := (Tools{}).ExtractKernel(tu, "k.bc", saxpy); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("prefetched", func(b *testing.B) {
		p := Prefetch(embedded(appabi.IREntry{Name: "kernels.cu", Bitcode: tu}))
		defer p.Close()
		// Analyze before timing: only the lookup is timed.
		if _, _, err := p.ExtractKernel(tu, "k.bc", saxpy); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, _, err := p.ExtractKernel(tu, "k.bc", saxpy); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestPrefetchReadsTheExecutable loads the units the way `mneme record`
// does, from the mneme_ir section of an executable (one made here with
// objcopy, the section laid out by the runtime's encoder).
func TestPrefetchReadsTheExecutable(t *testing.T) {
	kernels := deviceBitcode(t, "testdata/kernels.cu")
	other := deviceBitcode(t, "testdata/other.cu")
	objcopy, err := exec.LookPath("objcopy")
	if err != nil {
		t.Skip("objcopy not found: ", err)
	}
	host, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no host executable to add a section to: ", err)
	}
	dir := t.TempDir()
	section := filepath.Join(dir, "mneme_ir")
	data := append(appabi.EncodeIREntry(appabi.IREntry{Name: "other.cu", Bitcode: other}),
		appabi.EncodeIREntry(appabi.IREntry{Name: "kernels.cu", Bitcode: kernels})...)
	if err := os.WriteFile(section, data, 0o644); err != nil {
		t.Fatal(err)
	}
	app := filepath.Join(dir, "app")
	cmd := exec.Command(objcopy, "--add-section", appabi.IRSection+"="+section, host, app)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", cmd, err, msg)
	}
	p := Prefetch(func() ([]appabi.IREntry, error) { return appabi.ExecutableIR(app) })
	defer p.Close()
	sameAnswer(t, p, kernels, "RecordedIR_0123.bc", saxpy)
	sameAnswer(t, p, other, "RecordedIR_4567.bc", "_Z9unrelatedPi")
	if s := p.Stats(); s.Units != 2 || s.Hits != 2 || s.Computed != 0 {
		t.Errorf("stats %+v: want both embedded units found and answered from", s)
	}
}
