#!/usr/bin/env bash
# The GPU test entry point: run on a machine with an NVIDIA GPU, the CUDA
# driver and CUDA 13 at $CUDA_PATH (default /usr/local/cuda).
#  - With Go and LLVM 22 installed: builds everything and runs `go test` on the
#    GPU packages.
#  - Without Go (a bare GPU machine): uses what scripts/gpu-bundle.sh put in
#    .gpu/ (the prefix and prebuilt test binaries; .gpu/env.sh for clang-22).
# Then it builds the examples plainly and with the wrapper, records, inspects,
# replays and tunes, runs the recorder's checks (scripts/gpu-record-checks.sh)
# and the benchmarks of bench/ (bench/README.md), and prints a summary. Logs go to ./gpu-test-logs
# ($GPU_TEST_LOGS), and as one archive into $OUT when that is set.
# Narrowing a run: GPU_TEST_PACKAGES (Go packages, default cuda jit replay
# record record/devicecopy), GPU_BENCH=1 (add the jit, replay and staged-copy benchmarks),
# EXAMPLES (those recorded and replayed end to end; every example is built),
# SKIP_E2E, SKIP_NVCC (NVCC_EXAMPLES), SKIP_TUNE, SKIP_TUNE_CHECKS, TUNE_CHECKS, SKIP_LAUNCH_STATS, SKIP_FIDELITY (FIDELITY_EXAMPLES,
# FIDELITY_TRIALS, SKIP_FIDELITY_TUNE), SKIP_DEPLOY (DEPLOY_EXAMPLES), SKIP_DEPLOY_CLASSES (CLASSES_RUNS, CLASSES_TRIALS), SKIP_FIRST_LAUNCH, SKIP_OPTIMIZE (OPTIMIZE_EXAMPLES,
# OPTIMIZE_BUDGET), SKIP_PUBLIC (PUBLIC_PROGRAMS, PUBLIC_BUDGET, PUBLIC_RUNS), SKIP_RECORD_SCALE
# (SCALE_APPS, SCALE_RUNS, SCALE_VARIANTS), SKIP_RECORD_RANKS, SKIP_PYTHON,
# SKIP_RECORD_CHECKS, SKIP_RECORD_OVERHEAD (OVERHEAD_RUNS, rounds of the
# overhead benchmark, default 31; it skips the per-launch cost too).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
logs=${GPU_TEST_LOGS:-$root/gpu-test-logs}; rm -rf "$logs"; mkdir -p "$logs"
[ -f .gpu/env.sh ] && source .gpu/env.sh
if [ -f .gpu/mneme-bundle.tar.xz ] && [ ! -d .gpu/prefix ]; then xz -dc .gpu/mneme-bundle.tar.xz | tar xf - -C .gpu; fi
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

# The GPU tests read MNEME_GPU_REQUIRED (internal/gputest): set, a GPU test
# that would skip for want of a driver, a GPU or a tool fails instead. A
# package whose tests include GPU tests (TestGPU...) and ran none of them fails.
export MNEME_GPU_REQUIRED=1
for pkg in ${GPU_TEST_PACKAGES-cuda jit replay record record/devicecopy}; do
  [ -d "$pkg" ] || continue
  log=$logs/test-${pkg//\//_}.log
  run_tests "$pkg" > "$log"; rc=$?
  count() { grep -cE "^--- $1: ${2:-}" "$log"; }
  counts="$(count PASS) passed, $(count FAIL) failed, $(count SKIP) skipped; GPU tests: $(count PASS TestGPU) passed, $(count SKIP TestGPU) skipped"
  if [ $rc -ne 0 ] || [ "$(count FAIL)" -gt 0 ]; then note "go test $pkg: FAIL ($counts; see test-${pkg//\//_}.log)"
  elif grep -qs '^func TestGPU' "$pkg"/*_test.go && [ "$(count PASS TestGPU)" -eq 0 ]; then note "go test $pkg: FAIL (no GPU test ran: $counts; see test-${pkg//\//_}.log)"
  else note "go test $pkg: PASS ($counts)"; fi
  grep -E '^(--- (FAIL|SKIP)|\s+.*_test.go:[0-9]+: )' "$log" | head -20
done

if [ -n "${GPU_BENCH:-}" ]; then
  for pkg in jit replay record/devicecopy; do
    [ -d "$pkg" ] || continue
    if command -v go >/dev/null; then (CUDA_CACHE_DISABLE=1 go test -run XXX -bench . -benchtime 2s "./$pkg" 2>&1); else (cd "$pkg" && CUDA_CACHE_DISABLE=1 "$root/.gpu/tests/$pkg.test" -test.run XXX -test.bench . -test.benchtime 2s 2>&1); fi | tee "$logs/bench-${pkg//\//_}.log" | grep -E '^Benchmark'
  done
fi

# End to end on our examples: build plainly and with the wrapper, same output;
# record each; inspect; replay every instance (baseline and specialized).
ids() { mneme inspect --json "$1" | python3 -c 'import json,sys; [print(i["id"]) for k in json.load(sys.stdin)["kernels"] for i in k["instances"]]'; }
field() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); r=d["Result"]; print(sys.argv[2], "=", r.get(sys.argv[2]))' "$@" 2>/dev/null; }
if [ -z "${SKIP_E2E:-}" ]; then
  w=$logs/e2e; rm -rf "$w"; mkdir -p "$w"
  export MNEME=$prefix/bin/mneme CLANGXX=$(command -v clang++-22 || command -v clang++)
  EXAMPLES= examples/build-all.sh plain "$w/plain" > "$logs/build-plain.log" 2>&1 && note "examples build plain: PASS" || note "examples build plain: FAIL"
  EXAMPLES= examples/build-all.sh wrapper "$w/wrapper" > "$logs/build-wrapper.log" 2>&1 && note "examples build wrapper: PASS" || note "examples build wrapper: FAIL"
  EXAMPLES= examples/run-all.sh "$w/plain" "$w/wrapper" > "$logs/run-all.log" 2>&1 && note "examples plain vs wrapper output: SAME" || note "examples plain vs wrapper: FAIL (run-all.log)"
  for n in ${EXAMPLES:-vecadd stencil2d spmv devglobal dynshared saxpy_inplace scalarsweep pointers}; do
    rdb=$w/rdb/$n
    if ! mneme record -rdb "$rdb" --max-recordings 2 -- "$w/wrapper/$n/$n" > "$logs/record-$n.log" 2>&1; then
      note "record $n: FAIL (record-$n.log)"; tail -5 "$logs/record-$n.log"; continue
    fi
    mneme inspect "$rdb" > "$logs/inspect-$n.txt" 2>&1
    cat "$logs/inspect-$n.txt"
    nok=0; nall=0; bad=""
    for id in $(ids "$rdb"); do
      f=${id//\//_}
      for cfg in base spec; do
        flags=(); [ $cfg = spec ] && flags=(--specialize --specialize-dims)
        nall=$((nall+1))
        if mneme replay -rdb "$rdb" -rid "$id" --iterations 5 "${flags[@]}" > "$logs/replay-$n-$f-$cfg.json" 2> "$logs/replay-$n-$f-$cfg.err"; then
          nok=$((nok+1))
        else bad="$bad $id/$cfg(rc=$?)"; tail -3 "$logs/replay-$n-$f-$cfg.err"; fi
      done
    done
    note "record+replay $n: $nok/$nall verified$bad"
  done
  # Managed memory (examples/managed): the launch whose argument points into
  # cudaMallocManaged memory is refused by replay before any launch (exit 2,
  # naming the argument and the allocation); the one on cudaMalloc memory
  # replays verified.
  if [ -x "$w/wrapper/managed/managed" ]; then
    rdb=$w/rdb/managed
    mneme record -rdb "$rdb" -- "$w/wrapper/managed/managed" > "$logs/record-managed.log" 2>&1; r=$?
    mneme replay -rdb "$rdb" --kernel _Z5scalePfif > "$logs/replay-managed-scale.json" 2> "$logs/replay-managed-scale.err"; m=$?
    mneme replay -rdb "$rdb" --kernel _Z4fillPfi > "$logs/replay-managed-fill.json" 2> "$logs/replay-managed-fill.err"; f=$?
    named="not named"; grep -q "argument 0 .*points into the managed allocation" "$logs/replay-managed-scale.err" && named=named
    if [ $r -eq 0 ] && [ $m -eq 2 ] && [ "$named" = named ] && [ $f -eq 0 ]; then res=PASS; else res=FAIL; fi
    note "managed memory: $res (record rc=$r; replay of scale on managed memory rc=$m, want 2, argument $named; of fill on cudaMalloc memory rc=$f, want 0)"
    cat "$logs/replay-managed-scale.err"
  fi
  # A __managed__ variable (examples/nvcc/managedvar.cu, built with nvcc: clang-22
  # ignores __managed__): the recording lists `tally`, and replay refuses both
  # kernels before any launch (exit 2, naming tally): kernels recorded without
  # IR cannot be shown not to read it.
  if [ -x "${CUDA_PATH}/bin/nvcc" ]; then
    exe=$w/managedvar rdb=$w/rdb/managedvar
    if "${CUDA_PATH}/bin/nvcc" -O3 -arch="${NVCC_ARCH:-sm_90}" -Iexamples/common -o "$exe" examples/nvcc/managedvar.cu > "$logs/build-managedvar.log" 2>&1; then
      rm -rf "$rdb"
      timeout 120 mneme record -rdb "$rdb" -- "$exe" > "$logs/record-managedvar.log" 2>&1; r=$?
      timeout 120 mneme replay -rdb "$rdb" --kernel _Z5countPKfif > "$logs/replay-managedvar-count.json" 2> "$logs/replay-managedvar-count.err"; c=$?
      timeout 120 mneme replay -rdb "$rdb" --kernel _Z4fillPfi > "$logs/replay-managedvar-fill.json" 2> "$logs/replay-managedvar-fill.err"; f=$?
      listed="not listed"; grep -q '"name":"tally"' "$rdb/.mneme-record.managed" 2>/dev/null && listed=listed
      named="not named"; grep -q "__managed__ variables (tally" "$logs/replay-managedvar-count.err" && grep -q "__managed__ variables (tally" "$logs/replay-managedvar-fill.err" && named=named
      if [ $r -eq 0 ] && [ $c -eq 2 ] && [ $f -eq 2 ] && [ "$listed" = listed ] && [ "$named" = named ]; then res=PASS; else res=FAIL; fi
      note "managed variable: $res (record rc=$r, tally $listed; replay of count rc=$c, of fill rc=$f, want 2 and 2, variable $named)"
      cat "$logs/replay-managedvar-count.err"
    else
      note "managed variable: FAIL (nvcc build, see build-managedvar.log)"; tail -5 "$logs/build-managedvar.log"
    fi
  fi
  # A block size that keeps the grid covering the data verifies; one that leaves data uncovered must fail verification (exit 3), not crash.
  rdb=$w/rdb/vecadd
  if [ -d "$rdb" ]; then
    mneme replay -rdb "$rdb" --block 512 --grid 2048 > "$logs/replay-cover.json" 2>&1; c1=$?
    mneme replay -rdb "$rdb" --block 128 --grid 2048 > "$logs/replay-uncover.json" 2>&1; c2=$?
    note "vecadd block 512 x grid 2048 (covers): rc=$c1 (want 0); block 128 x grid 2048 (uncovered): rc=$c2 (want 3)"
  fi
  # The in-place kernel verifies on every timed iteration: replay it with many iterations and full checking.
  rdb=$w/rdb/saxpy_inplace
  [ -d "$rdb" ] && { mneme replay -rdb "$rdb" -rid "$(ids "$rdb" | head -1)" --iterations 50 > "$logs/replay-inplace.json" 2>&1; note "saxpy_inplace 50 iterations: rc=$?"; }
  # Fidelity: the stencil replayed with default<O3> against its time inside the application (medians of 20, events both sides).
  rdb=$w/rdb/stencil2d
  if [ -d "$rdb" ]; then
    app_us=$(STENCIL_TIMING=1 "$w/plain/stencil2d/stencil2d" 2>&1 >/dev/null | sed -n 's/.*(events): \([0-9.]*\) us/\1/p')
    id=$(ids "$rdb" | head -1)
    mneme replay -rdb "$rdb" -rid "$id" --passes 'default<O3>' --timer events --iterations 20 --warmup 3 > "$logs/fidelity-events.json" 2>&1
    mneme replay -rdb "$rdb" -rid "$id" --passes 'default<O3>' --iterations 20 --warmup 3 > "$logs/fidelity-cupti.json" 2>&1
    med() { python3 -c 'import json,statistics,sys; print(round(statistics.median(json.load(open(sys.argv[1]))["Result"]["exec_time"])/1000,2))' "$1" 2>/dev/null; }
    ev=$(med "$logs/fidelity-events.json"); cu=$(med "$logs/fidelity-cupti.json")
    note "fidelity stencil: application ${app_us} us (events); replay ${ev} us (events), ${cu} us (cupti); ratio $(python3 -c "print(round(float('$ev')/float('$app_us'),3))" 2>/dev/null)"
  fi
  # Tuning: the 80-configuration vector-add space, 7 timed iterations each,
  # in our spelling and in Mneme's (bench/gpu-tune80.sh).
  rdb=$w/rdb/vecadd
  if [ -d "$rdb" ] && [ -z "${SKIP_TUNE:-}" ]; then
    LOGS=$logs/tune80 bench/gpu-tune80.sh "$rdb" "$w" > "$logs/tune80.log" 2>&1
    grep -v '^==' "$logs/tune80.log"
    while read -r l; do note "${l#== }"; done < <(grep '^==' "$logs/tune80.log")
    cp "$w/tune-vecadd/summary.json" "$logs/tune-summary.json" 2>/dev/null
  fi
  if [ -z "${SKIP_TUNE_CHECKS:-}" ]; then
    scripts/gpu-tune-checks.sh "$w" > "$logs/tune-checks.log" 2>&1
    grep -E '^   ' "$logs/tune-checks.log"
    while read -r l; do note "${l#== }"; done < <(grep '^==' "$logs/tune-checks.log")
  fi
  # Faithful replay and launch-safe tuning on the examples with real programs'
  # traits: the application's own code vs its timer, the recompiled baseline
  # vs the original, and TPE tuning statuses (bench/gpu-fidelity.sh).
  if [ -z "${SKIP_FIDELITY:-}" ]; then
    LOGS=$logs/fidelity bench/gpu-fidelity.sh "$w" > "$logs/fidelity.log" 2>&1
    grep -v '^==' "$logs/fidelity.log"
    while read -r l; do note "${l#== }"; done < <(grep '^==' "$logs/fidelity.log")
  fi
  # Tuned kernels deployed into the applications: in-application speedups
  # vs replay, cold and warm cache, safety, annotate("jit") (scripts/gpu-deploy.sh).
  if [ -z "${SKIP_DEPLOY:-}" ]; then
    LOGS=$logs/deploy scripts/gpu-deploy.sh "$w" > "$logs/deploy.log" 2>&1
    grep -v '^==' "$logs/deploy.log"
    while read -r l; do note "${l#== }"; done < <(grep '^==' "$logs/deploy.log")
  fi
  # A kernel tuned per launch shape: sizesweep's triad, each size running
  # its class's code, in-application time per size untuned vs tuned
  # (scripts/gpu-deploy-classes.sh).
  if [ -z "${SKIP_DEPLOY_CLASSES:-}" ]; then
    LOGS=$logs/deploy-classes scripts/gpu-deploy-classes.sh "$w" > "$logs/deploy-classes.log" 2>&1
    grep -v '^==' "$logs/deploy-classes.log"
    while read -r l; do note "${l#== }"; done < <(grep '^==' "$logs/deploy-classes.log")
  fi
  # No first-launch penalty: a kernel launched once, plain against tuned
  # with its code in the cache (bench/gpu-first-launch.sh).
  if [ -z "${SKIP_FIRST_LAUNCH:-}" ]; then
    bench/gpu-first-launch.sh "$w/first-launch" > "$logs/first-launch.log" 2>&1
    grep -v '^==' "$logs/first-launch.log"
    while read -r l; do note "${l#== }"; done < <(grep '^==' "$logs/first-launch.log")
  fi
  # Launch statistics of a run: shapes, changing arguments and time shares
  # of examples/sizesweep (scripts/gpu-launch-stats.sh).
  if [ -z "${SKIP_LAUNCH_STATS:-}" ]; then
    LOGS=$logs/launch-stats scripts/gpu-launch-stats.sh "$w" > "$logs/launch-stats.log" 2>&1
    grep -v '^==' "$logs/launch-stats.log"
    while read -r l; do note "${l#== }"; done < <(grep '^==' "$logs/launch-stats.log")
  fi
  # From the application to a faster one: mneme optimize on the examples with
  # real programs' traits, in-app speedups against replay's, the examples'
  # own timers, reuse after a rerun and a changed kernel, two GPUs
  # (scripts/gpu-optimize.sh).
  if [ -z "${SKIP_OPTIMIZE:-}" ]; then
    LOGS=$logs/optimize scripts/gpu-optimize.sh "$w" > "$logs/optimize.log" 2>&1
    grep -v '^==' "$logs/optimize.log" | tail -n 40
    while read -r l; do note "${l#== }"; done < <(grep '^==' "$logs/optimize.log")
  fi
  # Recording at scale: copies against the pinned bandwidth, overhead on
  # the big examples, the 1% check (bench/gpu-record-scale.sh).
  if [ -z "${SKIP_RECORD_SCALE:-}" ]; then
    LOGS=$logs/record-scale bench/gpu-record-scale.sh "$w" > "$logs/record-scale.log" 2>&1
    grep -v '^==' "$logs/record-scale.log"
    while read -r l; do note "${l#== }"; done < <(grep '^==' "$logs/record-scale.log")
  fi
  # An MPI job's ranks recording into one folder (scripts/gpu-record-ranks.sh).
  if [ -z "${SKIP_RECORD_RANKS:-}" ]; then
    LOGS=$logs/record-ranks scripts/gpu-record-ranks.sh "$w" > "$logs/record-ranks.log" 2>&1
    while read -r l; do note "${l#== }"; done < <(grep '^==' "$logs/record-ranks.log")
  fi
  # The Python API on the recorded vector add, and Mneme's published scripts
  # against it (python/gpu-checks.sh).
  if [ -z "${SKIP_PYTHON:-}" ] && [ -d "$w/rdb/vecadd" ]; then
    python/gpu-checks.sh "$w/rdb/vecadd" "$(command -v mneme)" > "$logs/python-checks.log" 2>&1; rc=$?
    grep -E 'PASS|FAIL|SKIP|configs/s|configurations/s' "$logs/python-checks.log" | head -24
    passed=$(grep -cE '\bPASS\b' "$logs/python-checks.log") failed=$(grep -cE '\bFAIL\b' "$logs/python-checks.log")
    # A check script that stopped before its checks (no optuna, no wheels)
    # is a failure, never "0 passed, 0 failed".
    if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
      note "python checks: FAIL (rc=$rc before any check: $(tail -n 1 "$logs/python-checks.log"))"
    else
      note "python checks: $passed passed, $failed failed (python-checks.log)"
    fi
  fi
fi
# Applications built with nvcc alone, recorded through the driver
# (scripts/gpu-nvcc.sh): static and shared CUDA runtime, thrust, two
# translation units; each recorded, replayed verified, vecadd tuned.
if [ -z "${SKIP_NVCC:-}" ] && [ -x "${CUDA_PATH}/bin/nvcc" ]; then
  scripts/gpu-nvcc.sh "$prefix" "$logs/nvcc" > "$logs/nvcc.log" 2>&1
  while read -r l; do note "${l#== }"; done < <(grep '^==' "$logs/nvcc.log")
fi
# Public CUDA programs nobody here wrote (their sources in .public/, not in
# the repository; the step says SKIP without it) through mneme optimize, by
# their own timers (scripts/gpu-public.sh).
if [ -z "${SKIP_PUBLIC:-}" ]; then
  scripts/gpu-public.sh "$prefix" "$logs/public" > "$logs/public.log" 2>&1
  grep -v '^==' "$logs/public.log" | tail -n 40
  while read -r l; do note "${l#== }"; done < <(grep '^==' "$logs/public.log")
fi
# The recorder's own checks (allocation paths, managed memory, a crashing
# application, a small arena, per-thread streams, --kernels/--skip:
# scripts/gpu-record-checks.sh), then the recording-overhead benchmark
# (bench/gpu-record-overhead.sh: record_overhead.py, OVERHEAD_RUNS rounds) and
# the shim's cost per launch (bench/gpu-launch-cost.sh).
if [ -z "${SKIP_RECORD_CHECKS:-}" ]; then
  MNEME_PREFIX_DIR=$prefix LOGS=$logs/record-checks OUT= scripts/gpu-record-checks.sh > "$logs/record-checks.log" 2>&1
  grep -E '^(FAIL|crash|small arena|unwrapped|record rc_|graph capture)' "$logs/record-checks.log"
  note "record checks: $(tail -n 1 "$logs/record-checks.log")"
fi
if [ -z "${SKIP_RECORD_OVERHEAD:-}" ]; then
  MNEME_PREFIX_DIR=$prefix LOGS=$logs/record-overhead bench/gpu-record-overhead.sh "$logs/e2e" > "$logs/record-overhead.log" 2>&1
  sed -n '/interleaved runs/,/^recording overhead/p' "$logs/record-overhead.log" | grep -v '^  \['
  while read -r l; do note "$l"; done < <(grep '^recording overhead' "$logs/record-overhead.log" || echo "recording overhead: not measured (record-overhead.log)")
  MNEME_PREFIX_DIR=$prefix LOGS=$logs/launch-cost bench/gpu-launch-cost.sh > "$logs/launch-cost.log" 2>&1
  while read -r l; do note "$l"; done < <(grep -E '^per-launch cost' "$logs/launch-cost.log" || tail -n 1 "$logs/launch-cost.log")
fi

echo; echo "== summary"; printf '%s\n' "${summary[@]}" | tee "$logs/summary.txt"
# Where a collection folder is given (OUT), leave the logs there as one archive.
[ -n "${OUT:-}" ] && tar czf "$OUT/gpu-test-logs.tgz" --exclude=./e2e --exclude='./public/*/build' --exclude='./public/*/optimize/rdb' --exclude='./public/*/optimize/work' --exclude='./public/*/optimize/tune' -C "$logs" . 2>/dev/null
# The wrapped vector add, for running the Python checks on another machine.
[ -n "${OUT:-}" ] && [ -x "$logs/e2e/wrapper/vecadd/vecadd" ] && cp "$logs/e2e/wrapper/vecadd/vecadd" "$OUT/vecadd-wrapped"
exit 0
