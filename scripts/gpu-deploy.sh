#!/usr/bin/env bash
# Tuned kernels deployed into the applications (scripts/gpu-test.sh calls it
# after bench/gpu-fidelity.sh has recorded and tuned the examples). For
# each example with a tuned file (WORKDIR/fidelity-tune/NAME, or a tuning
# made here for the examples the fidelity step leaves out), the wrapped
# application runs
#   - with run-time JIT off (MNEME_JIT=off: the application's own code),
#   - with MNEME_TUNED_KERNELS and an empty cache (cold: compiles, counted
#     from MNEME_TRACE) and again with the filled cache (warm: must compile
#     nothing),
# and one row compares the application's own kernel timer with the replay
# speedup tuning reported, and the outputs (timer lines left out). Then the
# safety checks: a malformed tuned file, a configuration that cannot
# compile, and Proteus's annotate("jit") on jitspec. Lines starting with
# "== " are summary lines.
# Usage: scripts/gpu-deploy.sh WORKDIR (holding plain/, wrapper/, fidelity-rdb/, fidelity-tune/)
set -uo pipefail
w=${1:?usage: gpu-deploy.sh WORKDIR}
logs=${LOGS:-$w/deploy-logs}; mkdir -p "$logs"
examples=${DEPLOY_EXAMPLES:-"jitspec microphys nbody_dp histo_atomic tiled_matmul bigmem tracer"}
prefix=$(dirname "$(dirname "$(command -v mneme)")")
export MNEME_RT_LIB=${MNEME_RT_LIB:-$prefix/lib/libmneme_rt.so}
py() { python3 - "$@"; }
app_time() { sed -n 's/^kernel [A-Za-z_][A-Za-z0-9_]*: median \([0-9.]*\) us over .*/\1/p' "$1" | head -1; }
app_kernel() { [ -x "$1" ] && "$1" 2>/dev/null | sed -n 's/^kernel \([A-Za-z_][A-Za-z0-9_]*\): median .*/\1/p' | head -1; }
same_output() { cmp -s <(grep -v ': median ' "$1") <(grep -v ': median ' "$2") && echo same || echo DIFFERENT; }
compiles() { local n; n=$(grep -c ' deploy compiled ' "$1" 2>/dev/null); echo "${n:-0}"; }
ratio() { py "$1" "$2" <<'PY'
import sys
try: print(f"{float(sys.argv[1]) / float(sys.argv[2]):.3f}")
except Exception: print("-")
PY
}

# Examples the fidelity step does not tune (jitspec, tracer): record and
# tune them here.
for n in $examples; do
  case " ${FIDELITY_EXAMPLES:-microphys nbody_dp histo_atomic tiled_matmul bigmem} " in *" $n "*) continue ;; esac
  [ -x "$w/wrapper/$n/$n" ] && [ ! -f "$w/fidelity-tune/$n/summary.json" ] || continue
  rm -rf "$w/fidelity-rdb/$n" "$w/fidelity-tune/$n"
  # Only the kernel the example times (its plain build's timer line names
  # it), so tuning and its timer agree.
  timed=$(app_kernel "$w/plain/$n/$n")
  rflags=(); [ -n "$timed" ] && rflags=(--kernels "^$timed\\(")
  mneme record -rdb "$w/fidelity-rdb/$n" --max-recordings 1 "${rflags[@]}" -- "$w/wrapper/$n/$n" > "$logs/$n.record.log" 2>&1
  mneme tune -rdb "$w/fidelity-rdb/$n" --preset standard --sampler tpe --trials 30 --output "$w/fidelity-tune/$n" > "$logs/$n.tune.log" 2>&1
done

printf '%-13s %9s | %9s %9s %9s | %8s %8s | %7s %7s | %s\n' example replay_x jit_off_us cold_us warm_us app_x warm/rep compiles warm_cmp output
for n in $examples; do
  wapp=$w/wrapper/$n/$n tuned=$w/fidelity-tune/$n/mneme_tuned_kernels.json
  [ -x "$wapp" ] || { echo "== deploy $n: not built"; continue; }
  if [ ! -f "$tuned" ]; then
    if grep -qs '"baseline_is_best": *true' "$w/fidelity-tune/$n/summary.json"; then echo "== deploy $n: tuning found the application's own code best; nothing to deploy"
    else echo "== deploy $n: no tuned file ($tuned)"; fi
    continue
  fi
  mneme deploy check "$wapp" --tuned "$tuned" > "$logs/$n.check.log" 2>&1
  rep=$(py "$w/fidelity-tune/$n/summary.json" <<'PY'
import json, sys
try:
    s = json.load(open(sys.argv[1])); print(f"{s.get('best_speedup') or 1:.3f}")
except Exception: print("-")
PY
)
  cache=$w/deploy-cache/$n; rm -rf "$cache"
  MNEME_JIT=off "$wapp" > "$logs/$n.off.out" 2> "$logs/$n.off.err"
  MNEME_TUNED_KERNELS=$tuned MNEME_CACHE_DIR=$cache MNEME_TRACE=$logs/$n.cold.trace "$wapp" > "$logs/$n.cold.out" 2> "$logs/$n.cold.err"; rc_cold=$?
  MNEME_TUNED_KERNELS=$tuned MNEME_CACHE_DIR=$cache MNEME_TRACE=$logs/$n.warm.trace "$wapp" > "$logs/$n.warm.out" 2> "$logs/$n.warm.err"; rc_warm=$?
  off=$(app_time "$logs/$n.off.out") cold=$(app_time "$logs/$n.cold.out") warm=$(app_time "$logs/$n.warm.out")
  appx=$(ratio "$off" "$warm")
  printf '%-13s %9s | %9s %9s %9s | %8s %8s | %7s %7s | %s %s rc=%s/%s\n' "$n" "$rep" "${off:--}" "${cold:--}" "${warm:--}" "$appx" "$(ratio "$appx" "$rep")" \
    "$(compiles "$logs/$n.cold.trace")" "$(compiles "$logs/$n.warm.trace")" "$(same_output "$logs/$n.off.out" "$logs/$n.cold.out")" "$(same_output "$logs/$n.off.out" "$logs/$n.warm.out")" "$rc_cold" "$rc_warm"
  grep -h ' deploy compiled ' "$logs/$n.cold.trace" 2>/dev/null | sed 's/^[0-9]* [0-9]* /   cold: /' | head -3
  grep -h 'mneme:' "$logs/$n.cold.err" | head -3 | sed 's/^/   warning: /'
  echo "== deploy $n: replay speedup $rep, in application $appx (JIT off ${off:--} us, warm ${warm:--} us), compiles cold $(compiles "$logs/$n.cold.trace") warm $(compiles "$logs/$n.warm.trace"), output $(same_output "$logs/$n.off.out" "$logs/$n.warm.out")"
done

# Recording beside deployment: tracer's diagnose recorded while storm runs
# its tuned code (mneme record --with-tuned-kernels), and without the flag
# the tuned file ignored.
wapp=$w/wrapper/tracer/tracer tuned=$w/fidelity-tune/tracer/mneme_tuned_kernels.json
if [ -x "$wapp" ] && [ -f "$tuned" ]; then
  for mode in with without; do
    rdb=$w/deploy-record-$mode; rm -rf "$rdb" "$logs/record-$mode.trace"
    flags=(); [ $mode = with ] && flags=(--with-tuned-kernels)
    MNEME_TUNED_KERNELS=$tuned MNEME_CACHE_DIR=$w/deploy-cache/tracer MNEME_TRACE=$logs/record-$mode.trace \
      mneme record -rdb "$rdb" --kernels '^diagnose\(' --max-recordings 1 "${flags[@]}" -- "$wapp" > "$logs/record-$mode.out" 2>&1; rc=$?
    ok=0 all=0
    for id in $(mneme inspect --json "$rdb" 2>/dev/null | python3 -c 'import json,sys; [print(i["id"]) for k in json.load(sys.stdin)["kernels"] for i in k["instances"]]'); do
      all=$((all+1)); mneme replay -rdb "$rdb" -rid "$id" --iterations 3 > /dev/null 2>&1 && ok=$((ok+1))
    done
    tuned_runs=$(grep -c ' deploy \(compiled\|cache hit\)' "$logs/record-$mode.trace" 2>/dev/null)
    echo "== deploy record $mode --with-tuned-kernels: rc=$rc, storm's tuned code loaded ${tuned_runs:-0} time(s), $ok/$all recorded instance(s) replay verified, output $(same_output <(grep -v '^mneme' "$logs/tracer.off.out") <(grep -v '^mneme' "$logs/record-$mode.out"))"
  done
fi

# Safety: a malformed tuned file and a configuration that cannot compile
# leave the application's own code running, with one warning, exit 0.
n=microphys wapp=$w/wrapper/microphys/microphys
if [ -x "$wapp" ]; then
  MNEME_JIT=off "$wapp" > "$logs/safety.off.out" 2> "$logs/safety.off.err"
  mneme inspect --json "$w/fidelity-rdb/$n" > "$logs/safety.inspect.json" 2>/dev/null
  kernel=$(py "$logs/safety.inspect.json" <<'PY'
import json, sys
try: print(json.load(open(sys.argv[1]))["kernels"][0]["kernel_name"])
except Exception: print("")
PY
)
  printf '{"%s": {"config": {"passes": "default<O3>"' "$kernel" > "$logs/malformed.json"
  MNEME_TUNED_KERNELS=$logs/malformed.json "$wapp" > "$logs/safety.malformed.out" 2> "$logs/safety.malformed.err"; rc=$?
  echo "== deploy safety malformed file: rc=$rc, $(grep -c 'mneme:' "$logs/safety.malformed.err") warning(s), output $(same_output "$logs/safety.off.out" "$logs/safety.malformed.out")"
  sed 's/^/   /' "$logs/safety.malformed.err" | head -2
  printf '{"%s": {"Pipeline": "no-such-pass", "OptLevel": "3"}}' "$kernel" > "$logs/nocompile.json"
  MNEME_CACHE_DIR=$w/deploy-cache/nocompile PROTEUS_TUNED_KERNELS=$logs/nocompile.json "$wapp" > "$logs/safety.nocompile.out" 2> "$logs/safety.nocompile.err"; rc=$?
  echo "== deploy safety uncompilable configuration: rc=$rc, $(grep -c 'mneme:' "$logs/safety.nocompile.err") warning(s), output $(same_output "$logs/safety.off.out" "$logs/safety.nocompile.out")"
  sed 's/^/   /' "$logs/safety.nocompile.err" | cut -c1-300 | head -2
fi

# Proteus's annotate("jit"): jitspec folds its loop bound and modulus at run
# time with no tuned file at all.
wapp=$w/wrapper/jitspec/jitspec
if [ -x "$wapp" ]; then
  rm -rf "$w/deploy-cache/annotate"
  MNEME_JIT=off "$wapp" > "$logs/annotate.off.out" 2> "$logs/annotate.off.err"
  MNEME_CACHE_DIR=$w/deploy-cache/annotate MNEME_TRACE=$logs/annotate.trace "$wapp" > "$logs/annotate.on.out" 2> "$logs/annotate.on.err"; rc=$?
  MNEME_CACHE_DIR=$w/deploy-cache/annotate "$wapp" 40 5 > "$logs/annotate.other.out" 2> "$logs/annotate.other.err"; rc2=$?
  off=$(app_time "$logs/annotate.off.out") on=$(app_time "$logs/annotate.on.out")
  echo "== deploy annotate(\"jit\") jitspec: JIT off $off us, specialized $on us, speedup $(ratio "$off" "$on") (want >= 1.3), compiles $(compiles "$logs/annotate.trace"), rc=$rc, output $(same_output "$logs/annotate.off.out" "$logs/annotate.on.out"); other values: $(grep -o 'errors=[0-9]*' "$logs/annotate.other.out") rc=$rc2"
  grep -h 'mneme:' "$logs/annotate.on.err" | head -3 | sed 's/^/   warning: /'
fi
