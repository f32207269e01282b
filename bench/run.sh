#!/usr/bin/env bash
# The CPU benchmarks in one table: the Go benchmarks of the packages (their
# bench_test.go files) and the shim's C benchmarks of this folder, which
# cmd/mneme-rt/shim/shimtest builds and runs (forward_bench.c, stats_bench.c,
# stats_update_bench.c). Benchmarks that need a GPU skip without one and are
# listed as skipped (-v shows the skips); with a GPU they are measured too. Prints the raw `go test` output into $LOGS/bench.txt and
# one table (benchtable.py): time per operation, the other metrics, and the
# target with whether the figure meets it. Exits 1 when a benchmark fails or
# misses its target.
# Usage: bench/run.sh. Environment: PACKAGES (default the packages with CPU
# benchmarks), BENCH (a -bench pattern, default .), BENCHTIME (default 1s),
# LOGS (default /tmp/mneme-bench). The figures depend on the machine: compare
# runs on one machine, and read the shim's on a loaded machine with care.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
logs=${LOGS:-/tmp/mneme-bench}; mkdir -p "$logs"
pkgs=${PACKAGES:-./cmd/mneme-rt/shim/shimtest ./cuda ./db ./jit ./llvm ./record ./record/arena ./record/llvmir ./record/devicecopy ./replay ./tune}
[ -z "${CGO_CPPFLAGS:-}" ] && command -v llvm-config-22 >/dev/null &&
  export CGO_CPPFLAGS="$(llvm-config-22 --cppflags)" CGO_LDFLAGS="$(llvm-config-22 --ldflags) -Wl,-rpath,$(llvm-config-22 --libdir)"
# shellcheck disable=SC2086 # the package list is words
go test -count=1 -v -run XXX -bench "${BENCH:-.}" -benchtime "${BENCHTIME:-1s}" $pkgs >"$logs/bench.txt" 2>&1; rc=$?
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 "$here/benchtable.py" <"$logs/bench.txt"; trc=$?
if [ $rc -ne 0 ]; then
  echo "go test exited $rc ($logs/bench.txt):"; grep -E '^(FAIL|---|#|panic)' "$logs/bench.txt" | head -20
  exit 1
fi
exit $trc
