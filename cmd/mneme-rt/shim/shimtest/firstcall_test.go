package shimtest

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkFirstCallIntoGo times what a launch that asks the runtime
// library pays for entering Go from C, in a c-shared library as the
// runtime library is: the first call from the thread that loaded it, the
// first call from a C thread the Go runtime has not seen (the
// application's launching thread, where the library was loaded on the
// shim's own), that thread's later calls, and the load (dlopen) of the
// real runtime library. Each iteration runs the driver once, in a process
// of its own; the reported figures are medians in microseconds.
func BenchmarkFirstCallIntoGo(b *testing.B) {
	bd := newBuild(b)
	lib := filepath.Join(bd.dir, "libfirstcall.so")
	bd.run("go", "build", "-buildmode=c-shared", "-o", lib, "./testdata/firstcall")
	driver := filepath.Join(bd.dir, "firstcall_driver")
	bd.run(bd.cc, "-O2", "-Wall", "-o", driver, "testdata/firstcall_driver.c", "-ldl", "-lpthread")
	rt := realLibrary(b)
	figures := map[string][]float64{}
	b.ResetTimer()
	for range b.N {
		out, err := exec.Command(driver, lib, rt).Output()
		if err != nil {
			b.Fatalf("%s: %v\n%s", driver, err, out)
		}
		for _, f := range strings.Fields(string(out)) {
			name, v, ok := strings.Cut(f, "=")
			ns, err := strconv.ParseFloat(v, 64)
			if !ok || err != nil {
				b.Fatalf("driver output %q", out)
			}
			figures[name] = append(figures[name], ns/1e3)
		}
	}
	b.StopTimer()
	for name, vs := range figures {
		slices.Sort(vs)
		b.ReportMetric(vs[len(vs)/2], strings.TrimSuffix(name, "_ns")+"_us")
	}
}
