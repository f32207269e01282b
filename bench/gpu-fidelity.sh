#!/usr/bin/env bash
# Faithful replay and launch-safe tuning on the examples with the traits of
# real programs (scripts/gpu-test.sh calls it after building the examples).
# For each example: its own kernel timer (plain build), a recording with the
# default flags, then per instance
#   - `replay --original` (the application's own code) under --verify bitwise,
#   - the recompiled baseline under --verify auto and under --verify bitwise,
# timed with events (as the application times itself) and with CUPTI, and
# finally `mneme tune --preset standard --sampler tpe --trials 30` with the
# count of trials per status. Prints one table row per instance and the
# tuning table; lines starting with "== " are summary lines.
# Usage: bench/gpu-fidelity.sh WORKDIR (holding plain/ and wrapper/ builds)
set -uo pipefail
w=${1:?usage: gpu-fidelity.sh WORKDIR}
logs=${LOGS:-$w/fidelity-logs}; mkdir -p "$logs"
examples=${FIDELITY_EXAMPLES:-"microphys nbody_dp histo_atomic tiled_matmul bigmem"}
trials=${FIDELITY_TRIALS:-30}
py() { python3 - "$@"; }
app_time() { sed -n 's/^kernel \([A-Za-z_][A-Za-z0-9_]*\): median \([0-9.]*\) us over .*/\1 \2/p' "$1"; }
result() { py "$1" <<'PY'
import json, statistics, sys
try:
    r = json.load(open(sys.argv[1]))["Result"]
except Exception:
    print("none - - -"); sys.exit()
t = r.get("exec_time") or []
med = statistics.median(t) / 1000 if t else float("nan")
figs = [v for v in r.get("verification") or [] if v.get("differing")]
ulp = max([v.get("max_ulp", 0) for v in figs] or [0])
print(r["status"], f"{med:.2f}", r.get("reg_usage", "-"), ulp)
PY
}
printf '%-13s %-9s %9s | %9s %9s %-10s %-10s | %9s %9s %-10s %-10s %5s | %7s %7s\n' example instance app_us orig_ev orig_cu orig_auto orig_bits base_ev base_cu base_auto base_bits max_ulp orig/app base/orig
for n in $examples; do
  app=$w/plain/$n/$n wapp=$w/wrapper/$n/$n
  [ -x "$app" ] && [ -x "$wapp" ] || { echo "== fidelity $n: not built"; continue; }
  "$app" > "$logs/$n.app.out" 2>&1
  if grep -q SKIP "$logs/$n.app.out"; then echo "== fidelity $n: $(grep SKIP "$logs/$n.app.out")"; continue; fi
  read -r kname app_us < <(app_time "$logs/$n.app.out" | head -1)
  rdb=$w/fidelity-rdb/$n; rm -rf "$rdb"
  if ! mneme record -rdb "$rdb" --max-recordings 1 -- "$wapp" > "$logs/$n.record.log" 2>&1; then
    echo "== fidelity $n: record FAILED (default flags): $(tail -2 "$logs/$n.record.log" | tr '\n' ' ')"; continue
  fi
  echo "== fidelity $n: recorded with default flags ($(grep -o '[0-9]* instance(s) of [0-9]* kernel(s)' "$logs/$n.record.log"))"
  mneme inspect --json "$rdb" > "$logs/$n.inspect.json"
  tune_id= timed_id=
  while read -r id kdemangled; do
    [ -z "$tune_id" ] && tune_id=$id
    [ "$kdemangled" = "${kname:-}" ] && [ -z "$timed_id" ] && timed_id=$id
    f=${id//\//_}
    for v in orig orig-bits base base-bits; do
      case $v in
      orig) flags=(--original --verify auto) ;;
      orig-bits) flags=(--original --verify bitwise) ;;
      base) flags=(--verify auto) ;;
      base-bits) flags=(--verify bitwise) ;;
      esac
      timers="events cupti"; [ "${v%-bits}" != "$v" ] && timers=events
      for timer in $timers; do
        mneme replay -rdb "$rdb" -rid "$id" "${flags[@]}" --timer $timer --iterations 30 --warmup 3 > "$logs/$n.$f.$v.$timer.json" 2> "$logs/$n.$f.$v.$timer.err"
      done
    done
    read -r os oe oreg _ < <(result "$logs/$n.$f.orig.events.json")
    read -r _ oc _ _ < <(result "$logs/$n.$f.orig.cupti.json")
    read -r bs be breg bulp < <(result "$logs/$n.$f.base.events.json")
    read -r _ bc _ _ < <(result "$logs/$n.$f.base.cupti.json")
    read -r bbs _ _ _ < <(result "$logs/$n.$f.base-bits.events.json")
    read -r obs _ _ _ < <(result "$logs/$n.$f.orig-bits.events.json")
    ratio() { py "$1" "$2" <<'PY'
import sys
try: print(f"{float(sys.argv[1]) / float(sys.argv[2]):.3f}")
except Exception: print("-")
PY
    }
    # The application times one kernel; the others have no timer to compare with.
    a=-; [ "$kdemangled" = "${kname:-}" ] && a=${app_us:--}
    printf '%-13s %-9.9s %9s | %9s %9s %-10.10s %-10.10s | %9s %9s %-10.10s %-10.10s %5s | %7s %7s  %s\n' "$n" "${id#*/}" "$a" "$oe" "$oc" "$os" "$obs" "$be" "$bc" "$bs" "$bbs" "$bulp" "$(ratio "$oe" "$a")" "$(ratio "$be" "$oe")" "$kdemangled"
  done < <(py "$logs/$n.inspect.json" <<'PY'
import json, sys
for k in json.load(open(sys.argv[1]))["kernels"]:
    short = k.get("demangled_name") or k["kernel_name"]
    short = short.split("(")[0].split("::")[-1]
    for i in k["instances"]:
        print(i["id"], short)
PY
)
  if [ -z "${SKIP_FIDELITY_TUNE:-}" ]; then
    out=$w/fidelity-tune/$n; rm -rf "$out"
    mneme tune -rdb "$rdb" -rid "${timed_id:-$tune_id}" --preset standard --sampler tpe --trials "$trials" --output "$out" > "$logs/$n.tune.log" 2>&1; rc=$?
    py "$out/trials.jsonl" "$n" "$rc" <<'PY'
import collections, json, sys
rows = []
try:
    rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
except Exception:
    pass
c = collections.Counter(r.get("status") for r in rows)
first = rows[0].get("params", {}) if rows else {}
n = len(rows)
ver = c.get("verified", 0)
print(f"== tune {sys.argv[2]}: rc={sys.argv[3]}, {n} trials, " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())) +
      (f"; verified {100*ver/n:.0f}%" if n else "") + f"; trial 0 params {json.dumps(first)[:80]}")
PY
    grep -iE 'speedup|baseline|geometry' "$logs/$n.tune.log" | tail -4 | sed 's/^/   /'
  fi
done
