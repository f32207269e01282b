#!/usr/bin/env bash
# `mneme optimize` on the examples with real programs' traits (scripts/gpu-test.sh
# calls it after the examples are built with the wrapper):
#   sizesweep   a size sweep (triad at six sizes) and a per-launch step counter (adam)
#   withcublas  our kernel beside cuBLAS SGEMM
#   oneshot     a kernel launched once
#   heat2d      a 2-D stencil whose unguarded index limits the blocks
# For each: optimize (record, tune within OPTIMIZE_BUDGET split by share,
# measure in the application, keep what helps), then the application's own
# timer untuned against tuned with the kept file (OWN_RUNS interleaved runs
# each), and one row: kernels kept of tuned, each kept kernel's replay
# prediction and in-application speedup (the shim's timing), the example's
# own timer, end to end predicted against measured, and the output.
# Then: a rerun of one example reuses every result; the same example rebuilt
# with one kernel changed is tuned again for that kernel alone; with two GPUs
# (nvidia-smi), the tuning stage on --gpus 0,1 against --gpus 0 for the same
# trials. Lines starting with "== " are summary lines. Each example's
# report.json is copied to $OUT when that is set.
# Usage: scripts/gpu-optimize.sh WORKDIR (holding wrapper/ from examples/build-all.sh)
set -uo pipefail
w=${1:?usage: gpu-optimize.sh WORKDIR}
logs=${LOGS:-$w/optimize-logs}; mkdir -p "$logs"
examples=${OPTIMIZE_EXAMPLES:-"sizesweep withcublas oneshot heat2d"}
budget=${OPTIMIZE_BUDGET:-45s}
own_runs=${OWN_RUNS:-5}
here=$(cd "$(dirname "$0")/.." && pwd)

# own_ms FILE: the example's own timer from its stderr, in milliseconds
# ("... wall time: X ms ..." or "first launch of K: X us").
own_ms() { python3 - "$1" <<'PY'
import re, sys
t = open(sys.argv[1], errors="replace").read()
m = re.search(r"wall time: ([0-9.]+) ms", t) or re.search(r"first launch of \S+: ([0-9.]+) us", t)
if not m: print("-"); sys.exit()
v = float(m.group(1))
print(v / 1000 if "first launch" in m.group(0) else v)
PY
}

for n in $examples; do
  app=$w/wrapper/$n/$n; out=$w/optimize/$n
  if [ ! -x "$app" ]; then echo "== optimize $n: FAIL (no wrapped build at $app)"; continue; fi
  rm -rf "$out"
  s=$(date +%s)
  # The example's own timer (its stderr) judges the tuned runs too.
  mneme optimize --output "$out" --budget "$budget" --runs 5 --check-output \
    --own-timer '(?:wall time|first launch of \S+): ([0-9.]+) (?:ms|us)' -- "$app" > "$logs/$n.log" 2>&1; rc=$?
  secs=$(( $(date +%s) - s ))
  tail -n 12 "$logs/$n.log"
  # The application's own timer, untuned and tuned, interleaved.
  : > "$logs/$n.own"
  for i in $(seq "$own_runs"); do
    MNEME_TUNED_KERNELS= "$app" > "$logs/$n.untuned.out" 2> "$logs/$n.untuned.err"
    echo "untuned $(own_ms "$logs/$n.untuned.err")" >> "$logs/$n.own"
    MNEME_TUNED_KERNELS=$out/mneme_tuned_kernels.json "$app" > "$logs/$n.tuned.out" 2> "$logs/$n.tuned.err"
    echo "tuned $(own_ms "$logs/$n.tuned.err")" >> "$logs/$n.own"
  done
  same=$(cmp -s "$logs/$n.untuned.out" "$logs/$n.tuned.out" && echo same || echo DIFFERENT)
  row=$(python3 - "$out/report.json" "$logs/$n.own" <<'PY'
import json, statistics, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"no report ({e})"); sys.exit()
own = {"untuned": [], "tuned": []}
for line in open(sys.argv[2]):
    k, v = line.split()
    if v != "-": own[k].append(float(v))
ownx = "-"
if own["untuned"] and own["tuned"]:
    ownx = f"{statistics.median(own['untuned']) / statistics.median(own['tuned']):.3f}x"
tuned = [k for k in r["kernels"] if k["status"] in ("kept", "dropped")]
kept = [k for k in r["kernels"] if k["status"] == "kept"]
parts = [f"{len(kept)}/{len(tuned)} kept"]
for k in kept:
    pred, meas = k.get("predicted_speedup", 0), k.get("measured_speedup", 0)
    frac = meas / pred if pred else 0
    parts.append(f"{k.get('demangled') or k['name']}: replay {pred:.2f}x, in app {meas:.2f}x ({frac:.2f} of replay)")
for k in r["kernels"]:
    if k["status"] in ("dropped", "no-result"):
        parts.append(f"{k.get('demangled') or k['name']} {k['status']}: {k.get('reason', '')}")
e = r["end_to_end"]
um, tm = statistics.median(e["untuned_seconds"]), statistics.median(e["tuned_seconds"])
pred = e["predicted_tuned_seconds"]
agree = abs(pred - tm) / tm if tm else 0
parts.append(f"end to end {um/tm:.3f}x by wall time, predicted {pred:.3f} s vs measured {tm:.3f} s ({100*agree:.1f}% apart)")
parts.append(f"own timer {ownx}")
print("; ".join(parts))
PY
)
  echo "== optimize $n: rc=$rc in ${secs}s; $row; output $same"
  [ -n "${OUT:-}" ] && [ -f "$out/report.json" ] && cp "$out/report.json" "$OUT/optimize-$n.report.json"
done

# Incremental: the same command again reuses every result; a build with one
# kernel changed (sizesweep's adam, by its epsilon) tunes that kernel alone.
n=sizesweep; out=$w/optimize/$n
if [ -d "$out" ] && [ -x "$w/wrapper/$n/$n" ]; then
  mneme optimize --output "$out" --budget "$budget" --runs 3 -- "$w/wrapper/$n/$n" > "$logs/$n.rerun.log" 2>&1; rc1=$?
  again=$(grep -c 'of the GPU time)' "$logs/$n.rerun.log")
  reused=$(grep -c 'reusing the result' "$logs/$n.rerun.log")
  make -s -C "$here/examples/$n" BUILD="$w/changed/$n" CXX="$(mneme config cxx)" CUDAFLAGS="-O3 -std=c++17 -DADAM_EPS=1e-7f" > "$logs/$n.changed.build.log" 2>&1
  mneme optimize --output "$out" --budget "$budget" --runs 3 -- "$w/changed/$n/$n" > "$logs/$n.changed.log" 2>&1; rc2=$?
  retuned=$(grep 'of the GPU time)' "$logs/$n.changed.log" | sed 's/.*tuning [0-9]*\/[0-9]*: \(.*\) ([0-9.]*% of the GPU time).*/\1/' | tr '\n' ' ')
  reused2=$(grep 'reusing the result' "$logs/$n.changed.log" | sed 's/.*: \([^:]*\): reusing.*/\1/' | tr '\n' ' ')
  echo "== optimize incremental: rerun rc=$rc1 tuned $again, reused $reused; adam changed rc=$rc2 tuned again: ${retuned:-none}; reused: ${reused2:-none}"
fi

# Several GPUs: the same trials on one GPU and on two.
if [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 2 ]; then
  n=${GPUS_EXAMPLE:-withcublas}
  for g in 0 0,1; do
    rm -rf "$w/optimize-gpus-$g"
    mneme optimize --output "$w/optimize-gpus-$g" --budget 10m --trials "${GPUS_TRIALS:-60}" --gpus "$g" --runs 2 -- "$w/wrapper/$n/$n" > "$logs/gpus-$g.log" 2>&1
  done
  python3 - "$w/optimize-gpus-0/report.json" "$w/optimize-gpus-0,1/report.json" <<'PY'
import json, sys
one, two = (json.load(open(p)) for p in sys.argv[1:])
t1, t2 = one["tuning_seconds"], two["tuning_seconds"]
n1 = sum(len(k.get("trials", [])) for k in one["kernels"]); n2 = sum(len(k.get("trials", [])) for k in two["kernels"])
print(f"== optimize tuning stage: {n1} trials in {t1:.1f} s on 1 GPU, {n2} trials in {t2:.1f} s on 2 GPUs ({t1/t2:.2f}x)")
PY
fi
