#!/usr/bin/env bash
# The GPU test entry point: run on a machine with an NVIDIA GPU, the CUDA
# driver and CUDA 13 at $CUDA_PATH (default /usr/local/cuda).
#  - With Go and LLVM 22 installed: builds everything and runs `go test` on the
#    GPU packages.
#  - Without Go (a bare GPU machine): uses what scripts/gpu-bundle.sh put in
#    .gpu/ (the prefix and prebuilt test binaries; .gpu/env.sh for clang-22).
# Then it builds the examples plainly and with the wrapper, records, inspects,
# replays and tunes, and prints a summary. Logs go to $OUT or ./gpu-test-logs.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
logs=${OUT:-$root/gpu-test-logs}; mkdir -p "$logs"
[ -f .gpu/env.sh ] && source .gpu/env.sh
export CUDA_PATH=${CUDA_PATH:-/usr/local/cuda}
summary=()
note() { summary+=("$1"); echo "== $1"; }

if command -v go >/dev/null; then
  make all >/dev/null || { echo "build failed"; exit 1; }
  prefix=$root/build
  run_tests() { go test -count=1 -v "./$1" 2>&1; }
else
  prefix=$root/.gpu/prefix
  run_tests() { [ -x ".gpu/tests/$1.test" ] || { echo "no test binary for $1"; return 1; }; (cd "$1" && "$root/.gpu/tests/$1.test" -test.count=1 -test.v 2>&1); }
fi
export PATH=$prefix/bin:$PATH
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | sed 's/^/GPU: /'

for pkg in ${GPU_TEST_PACKAGES:-cuda jit replay record tune}; do
  [ -d "$pkg" ] || continue
  if run_tests "$pkg" > "$logs/test-$pkg.log"; then note "go test $pkg: PASS"; else note "go test $pkg: FAIL (see test-$pkg.log)"; fi
  grep -E '^(--- (FAIL|SKIP)|\s+.*_test.go:[0-9]+: )' "$logs/test-$pkg.log" | head -20
done

if [ -n "${GPU_BENCH:-}" ]; then
  for pkg in jit replay; do
    [ -d "$pkg" ] || continue
    if command -v go >/dev/null; then (go test -run XXX -bench . -benchtime 2s "./$pkg" 2>&1); else (cd "$pkg" && "$root/.gpu/tests/$pkg.test" -test.run XXX -test.bench . -test.benchtime 2s 2>&1); fi | tee "$logs/bench-$pkg.log" | grep -E '^Benchmark'
  done
fi

if [ -x examples/gpu-check.sh ]; then
  examples/gpu-check.sh "$logs" && note "examples: PASS" || note "examples: FAIL (see $logs)"
fi
echo; echo "== summary"; printf '%s\n' "${summary[@]}"
