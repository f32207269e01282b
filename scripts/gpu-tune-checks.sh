#!/usr/bin/env bash
# The tuning checks of the GPU test (called by gpu-test.sh): failures of every
# kind end with one trial per configuration; kill -9 then --resume loses and
# duplicates nothing; TPE against exhaustive search on the stencil; on a
# machine with two or more GPUs, the two-GPU throughput; and the heat stencil
# whose index is unguarded, tuned with no trial wasted on a block that faults;
# and sizesweep's kernels tuned across their recorded instances.
# Usage: gpu-tune-checks.sh WORKDIR (holding wrapper/ and rdb/ from gpu-test.sh)
set -uo pipefail
cd "$(dirname "$0")/.."
w=${1:?usage: gpu-tune-checks.sh WORKDIR}
say() { echo "== $*"; }
checks=" ${TUNE_CHECKS:-hazards exactcover instances resume tpe gpus} "
want() { [[ $checks == *" $1 "* ]]; }
trials() { python3 - "$@" <<'PY'
import json, sys, collections
path, want = sys.argv[1], int(sys.argv[2])
rows = []
for line in open(path):
    try: rows.append(json.loads(line))
    except ValueError: pass  # a torn last line after kill -9
keys = collections.Counter(r["config_key"] for r in rows)
dups = sum(c - 1 for c in keys.values())
st = collections.Counter(r["status"] for r in rows)
ok = [r for r in rows if r["status"] == "verified" and r["time_ns"] > 0]
best = min(ok, key=lambda r: r["time_ns"]) if ok else None
print(f"{len(rows)} trials for {want} configurations, {len(keys)} distinct, {dups} duplicates; statuses {dict(st)}; "
      f"best {best['time_ns']/1000:.2f} us (trial {best['number']})" if best else "no verified trial")
PY
}

# 1. Faults, traps and hangs: every configuration gets exactly one trial with a status.
if want hazards; then
app=$w/hazards/hazards
mkdir -p "$w/hazards"
mneme cxx -O3 tune/testdata/gpu/hazards.cu -o "$app" > "$w/hazards/build.log" 2>&1 || { say "hazards: build failed"; tail "$w/hazards/build.log"; }
if [ -x "$app" ] && mneme record -rdb "$w/rdb/hazards" --overwrite -- "$app" > "$w/hazards/record.log" 2>&1; then
  s=$(date +%s)
  # The kernel reads blockDim.x, so the default (safe) launch safety would
  # keep its recorded block: searching blocks is the point here.
  mneme tune -rdb "$w/rdb/hazards" --space tune/testdata/gpu/hazards.yaml --launch-safety aggressive --trial-timeout 10s --output "$w/tune-hazards" > "$w/hazards/tune.log" 2>&1
  say "tune hazards: rc=$? in $(( $(date +%s)-s )) s; $(trials "$w/tune-hazards/trials.jsonl" 6)"
  python3 -c 'import json,sys; [print("   bx=%s: %s %s" % (r["params"].get("bx", "recorded"), r["status"], (r.get("error") or "")[:90])) for r in map(json.loads, open(sys.argv[1]))]' "$w/tune-hazards/trials.jsonl"
else
  say "hazards: record failed"; tail -5 "$w/hazards/record.log"
fi
fi

# 1b. An unguarded global index (examples/heat2d): TPE over the standard
# preset's blocks keeps to those that divide the 1 Mi cells; no trial ends
# runtime_error or invalid_launch, and the summary names the rule.
if want exactcover; then
  app=$w/wrapper/heat2d/heat2d
  if [ -x "$app" ] && mneme record -rdb "$w/rdb/heat2d" --overwrite --max-recordings 1 -- "$app" > "$w/heat2d-record.log" 2>&1; then
    mneme tune -rdb "$w/rdb/heat2d" --preset standard --sampler tpe --trials 20 --seed 1 --output "$w/tune-heat2d" > "$w/heat2d-tune.log" 2>&1
    rc=$?
    python3 - "$w/tune-heat2d" "$rc" <<'PY'
import json, sys, collections
out, rc = sys.argv[1], sys.argv[2]
rows = [json.loads(l) for l in open(out + "/trials.jsonl")]
st = collections.Counter(r["status"] for r in rows)
wasted = st["runtime_error"] + st["invalid_launch"]
blocks = sorted({r["config"]["block"]["x"] for r in rows})
rule = json.load(open(out + "/summary.json")).get("block_rule", "")
ok = rc == "0" and wasted == 0 and rule != "" and all(1048576 % b == 0 for b in blocks)
print(f"== tune heat2d (unguarded index), 20 TPE trials: {'PASS' if ok else 'FAIL'} (rc={rc}, {wasted} wasted, statuses {dict(st)}, blocks {blocks}; rule: {rule[:60] or 'none'}...)")
PY
  else
    say "tune heat2d: FAIL (not built or record failed: $w/heat2d-record.log)"
  fi
fi

# 1c. Across instances, on examples/sizesweep recorded with its launch
# statistics: triad (six sizes) tuned with --kernel across its instances, and
# adam (a step counter that changes at every launch). Every verified trial
# has each instance's figures and their launch-weighted total; the tuned
# entry rests on the run's statistics; adam's step (argument 5) is never
# folded.
if want instances; then
  rdb=$w/rdb/sizesweep-instances
  app=$w/wrapper/sizesweep/sizesweep
  if [ -x "$app" ] && mneme record -rdb "$rdb" --overwrite --max-recordings 8 -- "$app" > "$w/instances-record.log" 2>&1; then
    for k in triad adam; do
      mneme tune -rdb "$rdb" --kernel $k --preset standard --sampler tpe --trials 30 --seed 1 --output "$w/tune-instances-$k" > "$w/instances-$k.log" 2>&1
      python3 - "$w/tune-instances-$k" "$?" "$k" <<'PY'
import json, sys, collections
out, rc, k = sys.argv[1], sys.argv[2], sys.argv[3]
rows = [json.loads(l) for l in open(out + "/trials.jsonl")]
st = collections.Counter(r["status"] for r in rows)
n = max((len(r.get("instances") or []) for r in rows), default=0)
bad_total = [r["number"] for r in rows if r["status"] == "verified" and
             abs(r["time_ns"] - sum(f["time_ns"] * f["launches"] for f in r["instances"]) - r.get("variant_cost_ns", 0)) > 1e-6 * r["time_ns"]]
summ = json.load(open(out + "/summary.json"))
folded = {a for r in rows if r["config"].get("specialize") for a in (r["config"].get("specialize_args") or ["all"])}
try:
    entry = next(iter(json.load(open(out + "/mneme_tuned_kernels.json")).values()))
except (OSError, StopIteration):
    entry = {}
stats_ok = "statistics: run" in summ.get("folding", "")
ok = rc == "0" and n >= 2 and not bad_total and stats_ok and (k != "adam" or not ({5, "all"} & folded))
classes = "; ".join(f"grid {c['grid']['x']}: block {c['config']['block']['x']} {c['speedup']:.3f}x" for c in entry.get("classes") or [])
print(f"== tune {k} across {n} instances: {'PASS' if ok else 'FAIL'} (rc={rc}, statuses {dict(st)}, totals wrong in {bad_total or 'no trial'}, "
      f"folded arguments {sorted(map(str, folded)) or 'none'}, speedup {summ.get('best_speedup')}; classes: {classes or 'none'})")
PY
      sed -n '/^per instance/,$p' "$w/instances-$k.log"
    done
  else
    say "tune across instances: FAIL (not built or record failed: $w/instances-record.log)"
  fi
fi

# 2. kill -9 halfway, then --resume: same set of configurations, no duplicates.
rdb=$w/rdb/stencil2d
if ! [ -d "$rdb" ] && { want resume || want tpe || want gpus; }; then
  say "tune checks on stencil2d: SKIP (no recording of it: EXAMPLES left it out)"
  exit 0
fi
id=$(mneme inspect --json "$rdb" | python3 -c 'import json,sys; print(json.load(sys.stdin)["kernels"][0]["instances"][0]["id"])')
out=$w/tune-kill
if want resume; then
mneme tune -rdb "$rdb" -rid "$id" --preset standard --iterations 20 --output "$out" > "$w/tune-kill.log" 2>&1 &
pid=$!
for _ in $(seq 100); do sleep 0.2; n=$(wc -l < "$out/trials.jsonl" 2>/dev/null || echo 0); [ "$n" -ge 60 ] && break; done
kill -9 $pid; wait $pid 2>/dev/null
before=$(wc -l < "$out/trials.jsonl")
size=$(mneme tune -rdb "$rdb" -rid "$id" --preset standard --dry-run 2>/dev/null | sed -n 's/.*points, \([0-9]*\) feasible.*/\1/p')
mneme tune -rdb "$rdb" -rid "$id" --preset standard --iterations 20 --output "$out" --resume > "$w/tune-resume.log" 2>&1
say "kill -9 after $before trials, then --resume (rc=$?): $(trials "$out/trials.jsonl" "$size")"
tail -3 "$w/tune-resume.log"
# The same run without interruption, for the best configuration.
mneme tune -rdb "$rdb" -rid "$id" --preset standard --iterations 20 --output "$w/tune-nokill" > "$w/tune-nokill.log" 2>&1
say "uninterrupted: $(trials "$w/tune-nokill/trials.jsonl" "$size")"
python3 - "$out/best.json" "$w/tune-nokill/best.json" <<'PY'
import json, sys
a, b = (json.load(open(p))["best"] for p in sys.argv[1:3])
ka, kb = a.get("config_key") or json.dumps(a.get("config"), sort_keys=True), b.get("config_key") or json.dumps(b.get("config"), sort_keys=True)
ta, tb = a.get("time_ns", 0), b.get("time_ns", 0)
print(f"== best after resume {ta/1000:.2f} us vs uninterrupted {tb/1000:.2f} us: " + ("same configuration" if ka == kb else f"different configurations, {abs(ta-tb)/max(tb,1)*100:.1f}% apart"))
PY
fi

# 3. TPE against exhaustive search on the stencil (seeded), a quarter of the trials.
if want tpe; then
mneme tune -rdb "$rdb" -rid "$id" --space tune/testdata/gpu/stencil-tiles.yaml --sampler exhaustive --output "$w/tune-exh" > "$w/tune-exh.log" 2>&1
total=$(wc -l < "$w/tune-exh/trials.jsonl")
budget=$(( total / 4 ))
say "exhaustive: $(trials "$w/tune-exh/trials.jsonl" "$total")"
for seed in 1 2 3; do
  mneme tune -rdb "$rdb" -rid "$id" --space tune/testdata/gpu/stencil-tiles.yaml --sampler tpe --seed $seed --trials $budget --output "$w/tune-tpe-$seed" > "$w/tune-tpe-$seed.log" 2>&1
  say "tpe seed $seed, $budget trials: $(trials "$w/tune-tpe-$seed/trials.jsonl" "$budget")"
done
fi

# 4. Two GPUs against one, on a compute-bound recording (the stencil, 500 timed launches a trial).
ngpu=$(nvidia-smi -L | wc -l)
if want gpus && [ "$ngpu" -ge 2 ]; then
  for g in 0 0,1; do
    s=$(date +%s%N)
    mneme tune -rdb "$rdb" -rid "$id" --space tune/testdata/gpu/stencil-tiles.yaml --iterations 500 --gpus $g --output "$w/tune-gpus-$g" > "$w/tune-gpus-$g.log" 2>&1
    e=$(( ($(date +%s%N)-s)/1000000 )); n=$(wc -l < "$w/tune-gpus-$g/trials.jsonl")
    say "gpus $g: $n trials, whole command $e ms = $(python3 -c "print(round($n*1000/$e,1))") configs/s; tune reports: $(grep -o '[0-9.]* configurations/s' "$w/tune-gpus-$g.log")"
  done
fi
