#!/usr/bin/env bash
# Launch statistics on the GPU: records examples/sizesweep (a bandwidth
# sweep at six sizes in one run, and an optimizer step whose step counter
# changes every launch) with --max-recordings 8 and checks, through `mneme
# inspect --json`, that the statistics show what the run did: every kernel
# with its launches, the sweep's six shapes of 20 launches each with one
# recorded instance per shape and the largest size holding most of its
# time, the step counter changing (more values than the table holds) while
# every other argument held, every shape timed, and the kernels' time shares
# adding up to 1. Then runs it outside a recording with MNEME_LAUNCH_STATS
# (as `mneme deploy measure` does) and checks the file it leaves: every
# launch counted, a sample timed. Usage: scripts/gpu-launch-stats.sh WORKDIR, where
# WORKDIR/wrapper/sizesweep/sizesweep is the wrapped build (scripts/gpu-test.sh
# makes it); mneme on PATH. Logs go to $LOGS (default WORKDIR/launch-stats).
# Its result lines start with "== launch statistics".
set -uo pipefail
w=${1:?usage: gpu-launch-stats.sh WORKDIR}
logs=${LOGS:-$w/launch-stats}
mkdir -p "$logs"
app=$w/wrapper/sizesweep/sizesweep
[ -x "$app" ] || { echo "== launch statistics sizesweep: FAIL (no wrapped build at $app)"; exit 1; }
rdb=$w/rdb-stats/sizesweep
rm -rf "$rdb"
if ! mneme record -rdb "$rdb" --max-recordings 8 -- "$app" >"$logs/record.out" 2>"$logs/record.err"; then
  echo "== launch statistics sizesweep: FAIL (record: $(tail -n 1 "$logs/record.err"))"; exit 1
fi
grep '^mneme' "$logs/record.err" | tail -n 1
mneme inspect "$rdb" >"$logs/inspect.txt" 2>&1 && sed -n '/^launch statistics/,$p' "$logs/inspect.txt"
mneme inspect --json "$rdb" >"$logs/inspect.json" 2>"$logs/inspect.err" || { echo "== launch statistics sizesweep: FAIL (inspect --json: $(cat "$logs/inspect.err"))"; exit 1; }
python3 - "$logs/inspect.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
s = doc.get("launch_stats")
bad = []
def check(ok, what):
    if not ok:
        bad.append(what)
if s is None:
    print("== launch statistics sizesweep: FAIL (inspect --json has no launch_stats)"); sys.exit(1)
check(s["complete"], "the statistics are not marked complete")
k = {x["kernel_name"]: x for x in s["kernels"]}
triad = next((v for n, v in k.items() if "triad" in n), None)
adam = next((v for n, v in k.items() if "adam" in n), None)
if triad is None or adam is None:
    print(f"== launch statistics sizesweep: FAIL (kernels {sorted(k)})"); sys.exit(1)
# The sweep: six shapes, 20 launches each, one instance each, the largest size first.
check(triad["launches"] == 120 and len(triad["shapes"]) == 6, f"triad: {triad['launches']} launches in {len(triad['shapes'])} shapes, want 120 in 6")
check(all(sh["launches"] == 20 for sh in triad["shapes"]), "triad: a shape without 20 launches")
check(all(len(sh["instances"]) == 1 for sh in triad["shapes"]), "triad: a shape without exactly one recorded instance")
# Of a shape's 20 launches the first and launches 2-9 are timed; a sample
# whose gate gave up (the stream held by a snapshot) is dropped.
check(all(sh["timed_launches"] >= 5 for sh in triad["shapes"]), "triad: a shape timed fewer than 5 times")
grids = [sh["grid"]["x"] for sh in triad["shapes"]]
check(grids[0] == max(grids) and triad["shapes"][0]["kernel_share"] > 0.5, f"triad: the largest size ({max(grids)} blocks) should hold most of its time; shapes by time: {grids}")
# Kernel time, not the host's launch latency: the smallest size (1/1024 of
# the largest's work) reads far below the largest (ungated, 17.4 us against
# 66.3 us on an H200).
by_size = sorted(triad["shapes"], key=lambda sh: sh["grid"]["x"])
check(by_size[0]["mean_ns"] < 0.15 * by_size[-1]["mean_ns"], f"triad: {by_size[0]['grid']['x']} blocks read {by_size[0]['mean_ns'] / 1e3:.1f} us against {by_size[-1]['mean_ns'] / 1e3:.1f} us at {by_size[-1]['grid']['x']}: launch latency in the sample")
check(abs(triad["recorded_share"] - 1) < 1e-6, f"triad: recorded instances cover {triad['recorded_share']:.3f} of its time, want all")
n = next(a for a in triad["args"] if a["index"] == 3)
check(n["distinct"] == 6 and not n["more_values"] and all(v["launches"] == 20 for v in n["values"]), f"triad: n took {n['distinct']} values, want 6 of 20 launches each")
check(all(a["invariant"] for a in triad["args"] if a["index"] != 3), "triad: an argument other than n changed")
# The optimizer step: one shape, its first 8 steps recorded (the cap), the step counter changing.
check(adam["launches"] == 300 and len(adam["shapes"]) == 1 and len(adam["shapes"][0]["instances"]) == 8, f"adam: {adam['launches']} launches in {len(adam['shapes'])} shapes, {sum(len(sh['instances']) for sh in adam['shapes'])} instances; want 300 in 1, 8 instances")
step = next(a for a in adam["args"] if a["index"] == 5)
check(not step["invariant"] and step["more_values"], f"adam: the step counter reads invariant={step['invariant']}, more_values={step['more_values']}")
check(all(a["invariant"] for a in adam["args"] if a["index"] != 5), "adam: an argument other than step changed")
check(adam["timed_launches"] >= 5, f"adam: {adam['timed_launches']} launches timed")
total = sum(x["time_share"] for x in s["kernels"])
check(abs(total - 1) < 1e-6, f"time shares add up to {total}")
shares = ", ".join(f"{x['kernel_name']} {100 * x['time_share']:.1f}% ({x['gpu_time_ns'] / 1e6:.2f} ms)" for x in s["kernels"])
mean = lambda sh: f"{sh['mean_ns'] / 1e3:.1f} us"
sweep = ", ".join(f"{sh['grid']['x']} blocks {mean(sh)}" for sh in sorted(triad["shapes"], key=lambda sh: sh["grid"]["x"]))
print(f"triad per size: {sweep}; adam {mean(adam['shapes'][0])} per step")
if bad:
    print("== launch statistics sizesweep: FAIL (" + "; ".join(bad) + ")"); sys.exit(1)
print(f"== launch statistics sizesweep: PASS (6 shapes of triad each recorded once, adam's step counter changing, shares {shares})")
PY

# Outside a recording: the run's statistics at exit, where MNEME_LAUNCH_STATS says.
rm -f "$logs/app-stats.json"
MNEME_RT_LIB=$(mneme config prefix)/lib/libmneme_rt.so MNEME_LAUNCH_STATS=$logs/app-stats.json "$app" >"$logs/app.out" 2>"$logs/app.err" || { echo "== launch statistics outside a recording: FAIL (sizesweep exited $?: $(tail -n 1 "$logs/app.err"))"; exit 1; }
python3 - "$logs/app-stats.json" <<'PY'
import json, os, sys
if not os.path.exists(sys.argv[1]):
    print("== launch statistics outside a recording: FAIL (no file at MNEME_LAUNCH_STATS)"); sys.exit(1)
s = json.load(open(sys.argv[1]))
k = {x["KernelName"]: x for x in s["Kernels"]}
triad = next((v for n, v in k.items() if "triad" in n), None)
adam = next((v for n, v in k.items() if "adam" in n), None)
bad = []
if not s["Complete"]: bad.append("not complete")
if triad is None or triad["Launches"] != 120 or len(triad["Shapes"]) != 6: bad.append(f"triad {triad and triad['Launches']} launches")
if adam is None or adam["Launches"] != 300: bad.append(f"adam {adam and adam['Launches']} launches")
if any(x["TimedLaunches"] == 0 for x in (triad or {"TimedLaunches": 0}, adam or {"TimedLaunches": 0})): bad.append("a kernel was not timed")
mean_us = lambda sh: sh["TimedNs"] / max(sh["TimedLaunches"], 1) / 1e3
if triad is not None and len(triad["Shapes"]) == 6:
    by_size = sorted(triad["Shapes"], key=lambda sh: sh["GridDims"]["x"])
    sweep = ", ".join(f"{sh['GridDims']['x']} blocks {mean_us(sh):.1f} us" for sh in by_size)
    print(f"triad per size outside a recording: {sweep}")
    if not mean_us(by_size[0]) < 0.15 * mean_us(by_size[-1]): bad.append(f"triad: the smallest size reads {mean_us(by_size[0]):.1f} us against {mean_us(by_size[-1]):.1f} us at the largest: launch latency in the sample")
if bad:
    print("== launch statistics outside a recording: FAIL (" + "; ".join(bad) + ")"); sys.exit(1)
per = lambda x: x["TimedNs"] / x["TimedLaunches"] / 1e3
print(f"== launch statistics outside a recording: PASS (triad 120 launches, {triad['TimedLaunches']} timed; adam 300, {adam['TimedLaunches']} timed, {per(adam):.1f} us each)")
PY
