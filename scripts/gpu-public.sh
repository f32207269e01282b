#!/usr/bin/env bash
# `mneme optimize` on public CUDA programs nobody here wrote (scripts/gpu-test.sh
# calls it). Their sources are not in the repository: each lives in
# PUBLIC_DIR/NAME/ (default .public/, ignored by git) as published, with a
# SOURCE file (repository, path, commit) and the license; PUBLIC_DIR/Common/
# holds the helper headers they include. For each program this script knows
# (the table in program() below; other folders are listed and skipped):
#   1. builds it with the mneme wrapper (`mneme config cxx`) for sm_90, as the
#      examples are built (examples/common.mk);
#   2. runs it untuned twice, keeping its own timer's figure;
#   3. runs `mneme optimize --budget $PUBLIC_BUDGET --check-output
#      --output-filter REGEX` on it (REGEX: the lines that print timings);
#   4. runs it once with every tuned candidate and the shim's trace
#      (MNEME_TRACE), counting the launches that ran the application's code
#      while the runtime library was still loading;
#   5. runs it untuned and with the kept tuned file interleaved PUBLIC_RUNS
#      times each and prints one line:
#      == public NAME: own timer untuned X tuned Y (speedup Z), wall ..., the
#      trials wasted on runtime errors and invalid launches,
#         output SAME/DIFFERENT, kept [...], predicted vs measured end to end ...
# Lines starting with "== " are summary lines. Each program's report (json and
# html) stays in LOGDIR/NAME/optimize/ (gpu-test.sh's archive keeps them).
# Usage: scripts/gpu-public.sh [PREFIX] [LOGDIR]
#   PREFIX  the mneme installation (default: mneme on PATH)
#   LOGDIR  logs, builds and optimize folders (default gpu-test-logs/public)
# Environment: PUBLIC_DIR, PUBLIC_PROGRAMS (names, default every folder),
# PUBLIC_BUDGET (default 40s), PUBLIC_RUNS (default 5), PUBLIC_TIMEOUT (seconds
# any one run of a program or of optimize may take, default 900), CUDA_PATH,
# ARCH (sm_90).
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
prefix=${1:-}
logs=${2:-$here/gpu-test-logs/public}
pub=${PUBLIC_DIR:-$here/.public}
budget=${PUBLIC_BUDGET:-40s}
runs=${PUBLIC_RUNS:-5}
limit=${PUBLIC_TIMEOUT:-900}
cuda=${CUDA_PATH:-/usr/local/cuda}
arch=${ARCH:-sm_90}
if [ ! -d "$pub" ]; then
  echo "== public programs: SKIP (no .public/)"
  exit 0
fi
[ -n "$prefix" ] && export PATH=$prefix/bin:$PATH
mkdir -p "$logs" && logs=$(cd "$logs" && pwd)
cudalib=$cuda/lib64; [ -d "$cudalib" ] || cudalib=$cuda/lib
cat > "$logs/host-max.h" <<'H'
// Forced into programs written for nvcc: under nvcc, CUDA's headers make
// max(float, float) callable from host code; under clang they declare it for
// the device only, so host calls need the standard one.
#include <algorithm>
using std::max;
H

# program NAME sets, for a program this script knows: srcs (its sources, the
# CUDA ones compiled as CUDA), cflags (extra compile flags), args, own (the
# Go regular expression optimize's --own-timer reads, where one line holds the
# program's time), timer (a
# Python regular expression for the line of the program's own timer) and
# timer_ms (a Python expression of g, that line's groups as numbers, giving
# milliseconds; summed over the lines), and filter (Go's and Python's regular
# expression for the output lines that print timings, left out of the
# comparison). Returns 1 for any other name. Where a program prints its time
# with few digits and a rate with more, the time is read from the rate.
program() {
  args=() cflags=() own=""
  case $1 in
  BlackScholes)
    # 512 launches of BlackScholesGPU timed by a host stopwatch around them;
    # it prints the mean per launch.
    srcs=(BlackScholes.cu BlackScholes_gold.cpp)
    timer='BlackScholesGPU\(\) time\s*:\s*([0-9.]+) msec' timer_ms='g[0]'
    own='BlackScholesGPU\(\) time\s*:\s*([0-9.]+) msec'
    filter='^(BlackScholesGPU\(\) time|Effective memory bandwidth|Gigaoptions per second|BlackScholes, Throughput)' ;;
  matrixMul)
    # 300 timed launches of MatrixMulCUDA<32> between events (one warm-up);
    # the time per launch from its GFlop/s (the printed msec has 3 decimals).
    srcs=(matrixMul.cu)
    timer='Performance= ([0-9.]+) GFlop/s, Time= [0-9.]+ msec, Size= ([0-9.]+) Ops' timer_ms='g[1] / g[0] / 1e6'
    own='Time= ([0-9.]+) msec'
    filter='^Performance=' ;;
  convolutionSeparable)
    # 16 timed iterations (one warm-up) of a row and a column kernel, a host
    # stopwatch around them; the time per iteration from its MPixels/sec.
    srcs=(convolutionSeparable.cu main.cpp convolutionSeparable_gold.cpp)
    timer='convolutionSeparable, Throughput = ([0-9.]+) MPixels/sec, Time = [0-9.]+ s, Size = ([0-9]+) Pixels' timer_ms='g[1] / g[0] / 1e3'
    filter='^convolutionSeparable, Throughput' ;;
  transpose)
    # 8 kernels, each 100 timed launches between events (one warm-up); it
    # prints each kernel's mean per launch: the sum is the program's time.
    # Its host code calls max(float, float), which CUDA's headers make
    # callable from host code only under nvcc: std::max is made visible.
    srcs=(transpose.cu)
    cflags=(-include "$logs/host-max.h")
    timer='Time = ([0-9.]+) ms,' timer_ms='g[0]'
    filter='^transpose .*Throughput' ;;
  *) return 1 ;;
  esac
}

# build NAME OUTDIR: the program built with the wrapper, as OUTDIR/NAME.
build() {
  local n=$1 dir=$2 objs=() s o cxx
  cxx=$(mneme config cxx) || return 1
  mkdir -p "$dir"
  for s in "${srcs[@]}"; do
    o=$dir/${s%.*}.o
    case $s in
    *.cu) "$cxx" -x cuda --cuda-path="$cuda" --cuda-gpu-arch="$arch" -I"$cuda/include/cccl" \
      --no-offload-new-driver -Wno-unknown-cuda-version -O3 -std=c++17 "${cflags[@]}" -I"$pub/Common" -I"$pub/$n" -c "$pub/$n/$s" -o "$o" || return 1 ;;
    *) "$cxx" -O3 -std=c++17 "${cflags[@]}" -I"$cuda/include" -I"$pub/Common" -I"$pub/$n" -c "$pub/$n/$s" -o "$o" || return 1 ;;
    esac
    objs+=("$o")
  done
  "$cxx" "${objs[@]}" -o "$dir/$n" -L"$cudalib" -lcudart -Wl,-rpath,"$cudalib"
}

# own_ms FILE: the program's own time in milliseconds from its output, "-"
# when its timer line is missing.
own_ms() {
  python3 - "$1" "$timer" "$timer_ms" <<'PY'
import re, sys
ms = [eval(sys.argv[3], {"g": [float(x) for x in m.groups()]}) for m in re.finditer(sys.argv[2], open(sys.argv[1], errors="replace").read(), re.M)]
print(f"{sum(ms):.9g}" if ms else "-")
PY
}

# filtered FILE: the output without the lines the filter matches.
filtered() {
  python3 - "$1" "$filter" <<'PY'
import re, sys
f = re.compile(sys.argv[2])
sys.stdout.write("".join(l for l in open(sys.argv[1], errors="replace").read().splitlines(True) if not f.search(l.rstrip("\n"))))
PY
}

now() { date +%s.%N; }

names=${PUBLIC_PROGRAMS:-$(cd "$pub" && for d in */; do d=${d%/}; [ "$d" = Common ] || echo "$d"; done)}
for n in $names; do
  if ! program "$n"; then echo "== public $n: SKIP (no build recipe in scripts/gpu-public.sh)"; continue; fi
  if [ ! -d "$pub/$n" ]; then echo "== public $n: SKIP (no $pub/$n)"; continue; fi
  d=$logs/$n; rm -rf "$d"; mkdir -p "$d"
  if ! build "$n" "$d/build" > "$d/build.log" 2>&1; then
    echo "== public $n: FAIL (build with the wrapper; see $d/build.log)"; tail -n 15 "$d/build.log"; continue
  fi
  app=$d/build/$n
  # Untuned, twice: the program runs and its timer reads.
  plain=()
  for i in 1 2; do
    MNEME_TUNED_KERNELS= timeout "$limit" "$app" "${args[@]}" > "$d/plain$i.out" 2> "$d/plain$i.err"; rc=$?
    plain+=("$(own_ms "$d/plain$i.out")")
    [ $rc -eq 0 ] || { echo "== public $n: FAIL (untuned run $i exits $rc; see $d/plain$i.out)"; tail -n 5 "$d/plain$i.err"; continue 2; }
  done
  echo "public $n: built; untuned own timer ${plain[0]} ms, ${plain[1]} ms"
  out=$d/optimize
  s=$(date +%s)
  # Where one line holds the program's time, optimize judges by it too.
  ownflag=(); [ -n "$own" ] && ownflag=(--own-timer "$own")
  timeout "$limit" mneme optimize --output "$out" --budget "$budget" --check-output --output-filter "$filter" "${ownflag[@]}" -- "$app" "${args[@]}" > "$d/optimize.log" 2>&1; orc=$?
  osecs=$(( $(date +%s) - s ))
  tail -n 12 "$d/optimize.log"
  tuned=$out/mneme_tuned_kernels.json
  [ -f "$tuned" ] || tuned=
  # One run with every tuned candidate (kept or not) and the shim's trace:
  # launches that ran the application's own code because the runtime library
  # was still loading in the background were neither tuned nor timed there.
  early=
  if [ -f "$out/work/candidates.json" ]; then
    rm -f "$d/trace.txt"
    MNEME_TUNED_KERNELS=$out/work/candidates.json MNEME_TRACE=$d/trace.txt timeout "$limit" "$app" "${args[@]}" > "$d/traced.out" 2> "$d/traced.err"
    untimed=$(grep -c "ran the application's code while the library loads" "$d/trace.txt" 2>/dev/null)
    early="; with every candidate tuned, ${untimed:-0} launch(es) ran untuned while the runtime library loaded"
  fi
  # Untuned and tuned interleaved, alternating which goes first.
  : > "$d/own"
  for i in $(seq "$runs"); do
    order="untuned tuned"; [ $((i % 2)) -eq 0 ] && order="tuned untuned"
    for k in $order; do
      file=; [ $k = tuned ] && file=$tuned
      t0=$(now)
      MNEME_TUNED_KERNELS=$file timeout "$limit" "$app" "${args[@]}" > "$d/$k$i.out" 2> "$d/$k$i.err"; rc=$?
      t1=$(now)
      echo "$k $(own_ms "$d/$k$i.out") $(python3 -c "print($t1 - $t0)") $rc" >> "$d/own"
      filtered "$d/$k$i.out" > "$d/$k$i.filtered"
    done
  done
  same=SAME
  for i in $(seq "$runs"); do
    cmp -s "$d/untuned1.filtered" "$d/untuned$i.filtered" && cmp -s "$d/untuned1.filtered" "$d/tuned$i.filtered" || same=DIFFERENT
  done
  row=$(python3 - "$out/report.json" "$d/own" "$same" <<'PY'
import json, statistics, sys
runs = {"untuned": [], "tuned": []}
failed = []
for line in open(sys.argv[2]):
    k, own, wall, rc = line.split()
    runs[k].append((None if own == "-" else float(own), float(wall)))
    if rc != "0":
        failed.append(f"{k} rc={rc}")
def med(k, i):
    v = [r[i] for r in runs[k] if r[i] is not None]
    return statistics.median(v) if v else None
ou, ot, wu, wt = med("untuned", 0), med("tuned", 0), med("untuned", 1), med("tuned", 1)
own = f"own timer untuned {ou:.4g} ms tuned {ot:.4g} ms (speedup {ou / ot:.3f}x)" if ou is not None and ot is not None else "own timer not read"
wall = f"wall untuned {wu:.3f} s tuned {wt:.3f} s ({wu / wt:.3f}x)"
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"{own}, {wall}, output {sys.argv[3]}, no report ({e})" + (f", runs failed: {' '.join(failed)}" if failed else "")); sys.exit()
kept = [k.get("demangled") or k["name"] for k in r["kernels"] if k["status"] == "kept"]
why = [f"{k.get('demangled') or k['name']} {k['status']}: {k.get('reason', '')}" for k in r["kernels"] if k["status"] in ("dropped", "no-result")]
e = r["end_to_end"]
tm, pred = statistics.median(e["tuned_seconds"]) if e.get("tuned_seconds") else None, e.get("predicted_tuned_seconds", 0)
agree = f"predicted vs measured end to end {pred:.3f} s vs {tm:.3f} s ({100 * abs(pred - tm) / tm:.1f}% apart)" if tm else "no end-to-end figures"
# Trials wasted on launches the kernel cannot take (issue 27's target: at
# most 5% of all trials): runtime errors and invalid launches.
statuses = [t.get("status") for k in r["kernels"] for t in k.get("trials") or []]
wasted = sum(s in ("runtime_error", "invalid_launch") for s in statuses)
trials = f"trials {len(statuses)}, wasted {wasted} ({100 * wasted / len(statuses):.1f}%)" if statuses else "no trials"
parts = [own, wall, f"output {sys.argv[3]}", f"kept [{', '.join(kept)}]", agree, trials]
if why: parts.append("; ".join(why))
if failed: parts.append("runs failed: " + " ".join(failed))
print(", ".join(parts))
PY
)
  echo "== public $n: $row; optimize rc=$orc in ${osecs}s$early"
done
exit 0
