package record

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzReadStatus: whatever the status file holds, reading it returns a
// status or an error naming the file, never a panic.
func FuzzReadStatus(f *testing.F) {
	f.Add([]byte(`{"pid":1,"kernels_registered":2,"errors":["x"]}`))
	f.Add([]byte(`{"arena_error":`))
	f.Add([]byte("\x00\xff"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, StatusFileName), data, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := ReadStatus(dir)
		if err == nil && s == nil {
			t.Fatal("nil status without an error")
		}
	})
}

// FuzzConfigFromEnv: any environment gives a configuration or an error,
// never a panic, and an arena given as a size is never empty (an empty or
// "auto" size is 0: the GPU's memory).
func FuzzConfigFromEnv(f *testing.F) {
	f.Add("d", "4", "0x153940000000", "saxpy", "4", "0", "1")
	f.Add("d", "0.0000001", "", "(", "-1", "x", "2")
	f.Add("d", "1e-12", "", "", "", "", "")
	f.Fuzz(func(t *testing.T, db, vass, base, kernels, maxRec, skip, compress string) {
		env := map[string]string{EnvDB: db, EnvVASS: vass, EnvVABase: base, EnvKernels: kernels, EnvMaxRecordings: maxRec, EnvSkip: skip, EnvCompress: compress}
		c, err := ConfigFromEnv(func(k string) string { return env[k] })
		auto := strings.TrimSpace(vass) == "" || strings.TrimSpace(vass) == VASSAuto
		if err == nil && ((c.VASize == 0) != auto || c.DB == "" || c.MaxRecordings < 0 || c.Skip < 0) {
			t.Fatalf("accepted a bad configuration: %+v", c)
		}
	})
}
