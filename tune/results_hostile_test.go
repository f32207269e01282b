package tune

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mneme-gpu/mneme/internal/safefile"
)

// TestResultsStayInsideTheirFolder crafts results folders whose files are
// links out of them and checks that nothing outside changes.
func TestResultsStayInsideTheirFolder(t *testing.T) {
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim")
	if err := os.WriteFile(victim, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	intact := func() {
		t.Helper()
		if data, _ := os.ReadFile(victim); string(data) != "precious\n" {
			t.Fatalf("the file outside the folder changed: %q", data)
		}
		if entries, _ := os.ReadDir(outside); len(entries) != 1 {
			t.Fatalf("files appeared outside the folder: %v", entries)
		}
	}
	newRun := func() string {
		dir := t.TempDir()
		r, err := CreateResults(dir, studyOptions(dir))
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
		return dir
	}

	t.Run("trials link on resume", func(t *testing.T) {
		dir := newRun()
		os.Remove(filepath.Join(dir, TrialsFile))
		os.Symlink(victim, filepath.Join(dir, TrialsFile))
		_, _, err := ResumeResults(dir, studyOptions(dir))
		if !errors.Is(err, safefile.ErrOutside) || !strings.Contains(err.Error(), TrialsFile) {
			t.Fatalf("resume: %v", err)
		}
		intact()
	})
	t.Run("logs link", func(t *testing.T) {
		dir := newRun()
		os.RemoveAll(filepath.Join(dir, "logs"))
		os.Symlink(outside, filepath.Join(dir, "logs"))
		_, _, err := ResumeResults(dir, studyOptions(dir))
		if !errors.Is(err, safefile.ErrOutside) || !strings.Contains(err.Error(), "logs") {
			t.Fatalf("resume: %v", err)
		}
		intact()
	})
	t.Run("fresh run into a folder of other files", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644)
		_, err := CreateResults(dir, studyOptions(dir))
		if err == nil || !strings.Contains(err.Error(), "not a results directory") {
			t.Fatalf("create: %v", err)
		}
		if _, err := os.Lstat(filepath.Join(dir, ConfigFile)); err == nil {
			t.Fatal("config.json written into a foreign folder")
		}
	})
	t.Run("complete last line that does not parse", func(t *testing.T) {
		dir := newRun()
		os.WriteFile(filepath.Join(dir, TrialsFile), []byte("{\"number\":0}\n{\"number\":\n"), 0o644)
		_, _, err := ResumeResults(dir, studyOptions(dir))
		if err == nil || !strings.Contains(err.Error(), TrialsFile+":2:") {
			t.Fatalf("resume: %v", err)
		}
	})
	t.Run("duplicate key in config.json", func(t *testing.T) {
		dir := newRun()
		os.WriteFile(filepath.Join(dir, ConfigFile), []byte(`{"seed":1,"seed":2}`), 0o644)
		_, _, err := ResumeResults(dir, studyOptions(dir))
		if err == nil || !strings.Contains(err.Error(), "seed: the key appears twice") {
			t.Fatalf("resume: %v", err)
		}
	})
}

// FuzzMergeTunedKernels feeds arbitrary tuned-kernel files (what
// mneme_tuned_kernels.json holds when a run adds its kernel) to the merge:
// it adds the kernel to a valid map or refuses the file naming it, and the
// file it leaves is always valid JSON.
func FuzzMergeTunedKernels(f *testing.F) {
	f.Add([]byte(`{"_Z1kv":{"config":{"passes":"default<O3>"},"instance":"ab","speedup":1.5}}`))
	f.Add([]byte(`{"a":1,"a":2}`))
	f.Add([]byte(`[1,2]`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, MnemeTunedFile)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		r := &Results{Dir: dir}
		err := r.MergeJSONMap(MnemeTunedFile, "_Z4testv", TunedKernel{Instance: "abc"})
		if err != nil {
			if !strings.Contains(err.Error(), MnemeTunedFile) {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		out, _ := os.ReadFile(path)
		var m map[string]map[string]any
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("merged file is not a map of kernel entries: %v\n%s", err, out)
		}
		if m["_Z4testv"]["instance"] != "abc" {
			t.Fatalf("the kernel was not added: %s", out)
		}
	})
}
