#!/usr/bin/env bash
# A kernel tuned per launch shape, deployed (scripts/gpu-test.sh calls it):
# examples/sizesweep's triad, a size sweep of six sizes in one run, is
# recorded with its launch statistics (one instance per size), tuned across
# those instances (mneme tune --kernel triad, which writes a configuration
# per launch-shape class), and the wrapped application then runs untuned
# (MNEME_JIT=off) and tuned from a warm cache, CLASSES_RUNS times each,
# interleaved, then as often counted (launch statistics). Per size it
# prints the application's own time per launch (its events around each
# size's launches, on stderr) and the GPU time per launch of the shim's
# sample, untuned against tuned, and whether the size ran its class's code
# or the application's (a shape no class covers); by GPU time a size must
# be at least 0.95x untuned where the kernel takes 5 us or more per launch
# (launch-bound sizes are shown only). Then two edits of the tuned file: one class
# dropped, the largest size's (it must run the application's code, the
# others theirs)
# and the folded values replaced by one no launch has (one warning naming
# the file and kernel, and the launches run the application's code, where
# the classes fold arguments; where they do not, no warning and each class
# runs its code). The first warm run's and
# each edit's trace are summarized (diagnose) so a result that looks as if
# the edit changed nothing says why. Lines starting with "== " are summary
# lines.
# Usage: scripts/gpu-deploy-classes.sh WORKDIR (holding wrapper/sizesweep/sizesweep)
set -uo pipefail
w=${1:?usage: gpu-deploy-classes.sh WORKDIR}
logs=${LOGS:-$w/deploy-classes-logs}; mkdir -p "$logs"
runs=${CLASSES_RUNS:-5}
prefix=$(dirname "$(dirname "$(command -v mneme)")")
export MNEME_RT_LIB=${MNEME_RT_LIB:-$prefix/lib/libmneme_rt.so}
app=$w/wrapper/sizesweep/sizesweep
fail() { echo "== deploy classes sizesweep: FAIL ($1)"; exit 1; }
# What a traced run's library and shim did with triad, in ms from the
# trace's first line: when the library was ready, the preload, triad's
# first launches (decided in the shim, asked of the library, or run while
# the library loaded), shapes in no class, disabled kernels, tuned kernels
# the executable lacks; launches run while the library loaded are counted.
# A run whose edit seems to change nothing shows here why: launches that
# never reached the library cannot take a class or warn.
diagnose() {
  python3 - "$1" <<'PY'
import sys
lines = [l.rstrip("\n").split(" ", 3) for l in open(sys.argv[1]) if l.count(" ") >= 3]
if not lines:
    print("   trace: empty"); sys.exit()
t0 = int(lines[0][0])
keep = ("loading the runtime library", "runtime library ready", "init:", "preload", "_Z5triad", "is in no class", "disabled", "not registered", "were not measured")
loading = sum(1 for l in lines if "while the library loads" in l[3])
shown = 0
for ns, pid, src, ev in lines:
    if any(k in ev for k in keep) and shown < 40:
        print(f"   {(int(ns) - t0) / 1e6:9.3f} ms {src}: {ev}")
        shown += 1
print(f"   trace: {loading} launch(es) ran the application's code while the library loaded")
PY
}
[ -x "$app" ] || fail "no wrapped build at $app"
rdb=$w/rdb-classes/sizesweep out=$w/tune-classes/triad cache=$w/deploy-cache/classes
rm -rf "$rdb" "$out" "$cache"
mneme record -rdb "$rdb" --kernels '^triad\(' --max-recordings 8 -- "$app" > "$logs/record.log" 2>&1 ||
  fail "record: $(tail -n 1 "$logs/record.log")"
# --variant-cost-us 0: triad's per-size gains are far below a variant's first
# launch, so by default it gets no classes; this step tests the classes'
# mechanism (the runtime picking by shape), so every winning shape gets one.
mneme tune -rdb "$rdb" --kernel triad --preset standard --sampler tpe --trials "${CLASSES_TRIALS:-40}" --seed 1 --variant-cost-us 0 \
  --output "$out" > "$logs/tune.log" 2>&1 || fail "tune: $(tail -n 1 "$logs/tune.log")"
sed -n '/^per instance/,$p' "$logs/tune.log"
tuned=$out/mneme_tuned_kernels.json
if [ ! -f "$tuned" ]; then
  echo "== deploy classes sizesweep: tuning found the application's own code best at every size; nothing to deploy"
  exit 0
fi
# The cold run fills the cache; the timed runs compile nothing.
MNEME_TUNED_KERNELS=$tuned MNEME_CACHE_DIR=$cache MNEME_TRACE=$logs/cold.trace "$app" > "$logs/cold.out" 2> "$logs/cold.err"
"$app" > /dev/null 2>&1 # a warm-up of the GPU and the driver
for i in $(seq "$runs"); do
  MNEME_JIT=off "$app" > "$logs/off.$i.out" 2> "$logs/off.$i.err"; echo $? > "$logs/off.$i.rc"
  MNEME_TUNED_KERNELS=$tuned MNEME_CACHE_DIR=$cache MNEME_TRACE=$logs/warm.$i.trace "$app" > "$logs/on.$i.out" 2> "$logs/on.$i.err"; echo $? > "$logs/on.$i.rc"
done
# The same, counted (MNEME_LAUNCH_STATS): each shape's GPU time per launch
# from the shim's gated sample, its first launch apart, so the classes'
# code is judged without a new function's first launch (~50-250 us, which
# the application's own per-size span of 20 launches holds and tuning
# charges as --variant-cost-us).
for i in $(seq "$runs"); do
  MNEME_JIT=off MNEME_LAUNCH_STATS=$logs/stats-off.$i.json "$app" > /dev/null 2>&1
  MNEME_TUNED_KERNELS=$tuned MNEME_CACHE_DIR=$cache MNEME_LAUNCH_STATS=$logs/stats-on.$i.json "$app" > /dev/null 2>&1
done
python3 - "$logs" "$runs" "$tuned" <<'PY'
import glob, json, re, statistics, sys
logs, runs, tuned = sys.argv[1], int(sys.argv[2]), sys.argv[3]
entry = next(iter(json.load(open(tuned)).values()))
classes = {(c["grid"]["x"], c["block"]["x"], c.get("shared_mem", 0)): c for c in entry.get("classes") or []}
def times(kind):
    per = {}
    for i in range(1, runs + 1):
        for m in re.finditer(r"^triad n=(\d+): ([0-9.]+) us per launch", open(f"{logs}/{kind}.{i}.err").read(), re.M):
            per.setdefault(int(m.group(1)), []).append(float(m.group(2)))
    return per
off, on = times("off"), times("on")
def gpu_times(kind):
    """Per grid x: the sampled GPU time per launch of triad's shape, in us, per run."""
    per = {}
    for i in range(1, runs + 1):
        try:
            st = json.load(open(f"{logs}/stats-{kind}.{i}.json"))
        except (OSError, ValueError):
            continue
        for k in st.get("Kernels") or []:
            if "triad" not in k.get("KernelName", ""):
                continue
            for sh in k.get("Shapes") or []:
                if sh.get("TimedLaunches"):
                    per.setdefault(list(sh["GridDims"].values())[0], []).append(sh["TimedNs"] / sh["TimedLaunches"] / 1e3)
    return per
goff, gon = gpu_times("off"), gpu_times("on")
same = all(open(f"{logs}/off.{i}.out").read() == open(f"{logs}/on.{i}.out").read() for i in range(1, runs + 1))
rcs = {open(f"{logs}/{k}.{i}.rc").read().strip() for k in ("off", "on") for i in range(1, runs + 1)}
warnings = sum(open(f"{logs}/on.{i}.err").read().count("mneme:") for i in range(1, runs + 1))
compiles = sum(open(p).read().count(" deploy compiled ") for p in glob.glob(f"{logs}/warm.*.trace"))
print(f"{'size':>9} {'grid':>6} | {'code run':<28} | {'untuned us':>10} {'tuned us':>9} {'in-app x':>8} | {'GPU untuned':>11} {'GPU tuned':>9} {'GPU x':>6} | {'replay x':>8}")
# Each size is judged by its GPU time per launch in the shim's sample
# (counted runs, first launches apart): the classes' code must be at least
# 0.95x the application's where the kernel takes GPU_BOUND_US or more per
# launch. Smaller sizes are launch-bound (triad's small sizes run ~1-2 us):
# their times are shown, not judged. The application's own per-size span
# (its events around each size's 20 launches) is shown beside: it also
# holds each class's first launch and, for the first sizes, the library's
# start, which `mneme deploy measure` weighs end to end.
gpu_bound_us = 5.0
slower, unjudged, unsampled = [], [], []
for n in sorted(off):
    grid = (n + 255) // 256
    c = classes.get((grid, 256, 0))
    if c:
        code = f"class: block {c['config'].get('block', {}).get('x', 256)}, {c['config'].get('passes') or 'default'}"[:28]
    elif classes:
        code = "application's (no class)"
    else:
        code = "tuned (one configuration)"
    u, t = statistics.median(off[n]), statistics.median(on.get(n, [float("nan")]))
    x = u / t if t else float("nan")
    gu = statistics.median(goff[grid]) if goff.get(grid) else float("nan")
    gt = statistics.median(gon[grid]) if gon.get(grid) else float("nan")
    gx = gu / gt if gt == gt and gt > 0 else float("nan")
    if c and gx != gx:
        unsampled.append(n)
    elif c and gx < 0.95:
        (slower if gu >= gpu_bound_us else unjudged).append(n)
    rep = f"{c['speedup']:.3f}" if c else "-"
    print(f"{n:>9} {grid:>6} | {code:<28} | {u:>10.2f} {t:>9.2f} {x:>8.3f} | {gu:>11.2f} {gt:>9.2f} {gx:>6.3f} | {rep:>8}")
uncovered = open(f"{logs}/cold.trace").read().count("is in no class") if classes else 0
ok = same and rcs == {"0"} and warnings == 0 and compiles == 0 and not slower and not unsampled
print(f"== deploy classes sizesweep: {'PASS' if ok else 'FAIL'} ({len(classes)} classes over {len(off)} sizes, "
      f"{uncovered} uncovered shape(s) ran the application's code, medians of {runs} interleaved runs, "
      f"output {'same' if same else 'DIFFERENT'}, exit codes {sorted(rcs)}, {warnings} warning(s), {compiles} compiles warm"
      + (f", GPU time per launch slower than 0.95x at sizes {slower}" if slower else "")
      + (f", no GPU sample at sizes {unsampled}" if unsampled else "")
      + (f"; slower but not judged (launch-bound: under {gpu_bound_us:g} us per launch untuned) at sizes {unjudged}" if unjudged else "") + ")")
PY
echo "   the first warm run, traced:"
diagnose "$logs/warm.1.trace"

# Edits of the tuned file: a class dropped, folded values no launch has.
python3 - "$tuned" "$logs" <<'PY'
import json, sys
tuned, logs = sys.argv[1], sys.argv[2]
entries = json.load(open(tuned))
name, e = next(iter(entries.items()))
if len(e.get("classes") or []) >= 2:
    # The class of the largest grid: sizesweep launches it last, after the
    # library is ready (launches made while it loads never reach it, so a
    # class of the first size could be dropped without a trace).
    d = json.loads(json.dumps(entries))
    last = max(range(len(d[name]["classes"])), key=lambda i: d[name]["classes"][i]["grid"]["x"])
    print(f"   dropped the class of grid {d[name]['classes'][last]['grid']['x']}")
    del d[name]["classes"][last]
    json.dump(d, open(f"{logs}/one-class-dropped.json", "w"))
if e.get("folded"):
    d = json.loads(json.dumps(entries))
    for f in d[name]["folded"]:
        f["values"] = ["ffffff7f" if len(v) == 8 else "ff" * (len(v) // 2) for v in f["values"][:1]]
        f["distinct"] = max(f.get("distinct", 1), 1)
    json.dump(d, open(f"{logs}/unmeasured-values.json", "w"))
PY
MNEME_JIT=off "$app" > "$logs/safety.off.out" 2>/dev/null
# The folded-values edit warns only where a launch that reaches the library
# has a configuration that folds: the classes' when there are some, else the
# entry's. sizesweep launches its sizes in ascending order, 20 each; the
# launches made while the library loads (counted in the run's trace) run the
# application's code and never reach it, so a class of a size launched only
# then cannot warn.
expect_warn() {
  python3 - "$tuned" "$1" <<'PY'
import json, sys
e = next(iter(json.load(open(sys.argv[1])).values()))
early = open(sys.argv[2]).read().count("ran the application's code while the library loads")
classes = sorted(e.get("classes") or [], key=lambda c: c["grid"]["x"])
if not classes:
    print(1 if e["config"].get("specialize") else 0); sys.exit()
reached = [c for i, c in enumerate(classes) if (i + 1) * 20 > early]
print(1 if any(c["config"].get("specialize") for c in reached) else 0)
PY
}
if [ -f "$logs/one-class-dropped.json" ]; then
  MNEME_TUNED_KERNELS=$logs/one-class-dropped.json MNEME_CACHE_DIR=$cache MNEME_TRACE=$logs/dropped.trace "$app" > "$logs/dropped.out" 2> "$logs/dropped.err"; rc=$?
  echo "== deploy classes, one class dropped: rc=$rc, $(grep -c 'is in no class' "$logs/dropped.trace") launch shape(s) ran the application's code, $(grep -c 'mneme:' "$logs/dropped.err") warning(s), compiles $(grep -c ' deploy compiled ' "$logs/dropped.trace"), output $(cmp -s "$logs/safety.off.out" "$logs/dropped.out" && echo same || echo DIFFERENT) (want rc=0, 1 shape, 0 warnings, 0 compiles, same)"
  diagnose "$logs/dropped.trace"
else
  echo "== deploy classes, one class dropped: not run (the tuned entry has fewer than two classes)"
fi
if [ -f "$logs/unmeasured-values.json" ]; then
  MNEME_TUNED_KERNELS=$logs/unmeasured-values.json MNEME_CACHE_DIR=$cache MNEME_TRACE=$logs/unmeasured.trace "$app" > "$logs/unmeasured.out" 2> "$logs/unmeasured.err"; rc=$?
  echo "== deploy classes, folded values no launch has: rc=$rc, $(grep -c 'mneme:' "$logs/unmeasured.err") warning(s), compiles $(grep -c ' deploy compiled ' "$logs/unmeasured.trace"), output $(cmp -s "$logs/safety.off.out" "$logs/unmeasured.out" && echo same || echo DIFFERENT) (want rc=0, $(expect_warn "$logs/unmeasured.trace") warning(s), 0 compiles, same)"
  sed 's/^/   /' "$logs/unmeasured.err" | grep 'mneme:' | head -2
  diagnose "$logs/unmeasured.trace"
else
  echo "== deploy classes, folded values no launch has: not run (the tuned entry folds no argument)"
fi
