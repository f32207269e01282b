#!/usr/bin/env bash
# GPU step: applications built with nvcc alone, recorded through the driver
# (libmneme_inject.so under CUDA_INJECTION64_PATH, CUPTI callbacks), with the
# static and the shared CUDA runtime; withcublas records cuBLAS's own kernels. For each program: its output plainly and
# under `mneme record` (must be the same), the recording's instances replayed
# (each must verify, bitwise, running the recorded machine code), the
# recording's wall-time overhead, and a launch-geometry tuning of the first
# instance; the launch statistics (every kernel by time share, cuBLAS's
# too); deployment of tuned kernels into the unmodified binaries through the
# same library (MNEME_TUNED_KERNELS). Also the bad inputs: a program without
# CUDA and a driver without CUPTI, each one clear error.
# Usage: scripts/gpu-nvcc.sh [PREFIX] [LOGDIR]; prints "== ..." result lines.
# NVCC_EXAMPLES narrows the programs; NVCC (default $CUDA_PATH/bin/nvcc).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
prefix=${1:-$root/build}
logs=${2:-$root/gpu-nvcc-logs}
mkdir -p "$logs" && logs=$(cd "$logs" && pwd)
export PATH=$prefix/bin:$PATH
cuda=${CUDA_PATH:-/usr/local/cuda}
nvcc=${NVCC:-$cuda/bin/nvcc}
arch=${NVCC_ARCH:-sm_90}
w=$logs/nvcc; rm -rf "$w"; mkdir -p "$w"
ids() { mneme inspect --json "$1" 2>/dev/null | python3 -c 'import json,sys; [print(i["id"]) for k in json.load(sys.stdin)["kernels"] for i in k["instances"]]'; }
# The output without the timing lines, which vary from run to run.
stable() { grep -v '^kernel .*: median ' "$1"; }
now() { date +%s.%N; }
# Every step is bounded: a hang is reported as rc=124, not a stuck run.
limit() { timeout "${NVCC_STEP_TIMEOUT:-120}" "$@"; }

# name: sources (relative to examples/)
declare -A src=(
  [vecadd]="vecadd/vecadd.cu" [saxpy_inplace]="saxpy_inplace/saxpy_inplace.cu" [pointers]="pointers/pointers.cu"
  [spmv]="spmv/spmv.cu" [stencil2d]="stencil2d/stencil2d.cu" [devglobal]="devglobal/devglobal.cu"
  [dynshared]="dynshared/dynshared.cu" [scalarsweep]="scalarsweep/scalarsweep.cu"
  [thrust_sort]="nvcc/thrust_sort.cu" [multifile]="nvcc/multifile_main.cu nvcc/multifile_kernels.cu"
  [withcublas]="withcublas/withcublas.cu" [blockprobe]="nvcc/blockprobe.cu"
)
# Per program and runtime: instances replayed verified, recorded, refused
# with exit 7 (an address range taken).
declare -A verified=() recorded=() taken=()
# Libraries a program links beyond the CUDA runtime.
declare -A libs=([withcublas]="-lcublas")
programs=${NVCC_EXAMPLES:-vecadd saxpy_inplace pointers spmv stencil2d devglobal dynshared scalarsweep thrust_sort multifile withcublas blockprobe}
# Every build at once (nvcc is single-threaded; thrust's take the longest).
for n in $programs; do
  for rt in static shared; do
    files=(); for f in ${src[$n]}; do files+=("examples/$f"); done
    ( "$nvcc" -O3 -arch="$arch" -cudart "$rt" -Iexamples/common -o "$w/$n-$rt" "${files[@]}" ${libs[$n]:-} > "$logs/build-$n-$rt.log" 2>&1
      echo $? > "$logs/build-$n-$rt.rc" ) &
  done
done
wait
for n in $programs; do
  for rt in static shared; do
    exe=$w/$n-$rt
    if [ "$(cat "$logs/build-$n-$rt.rc" 2>/dev/null)" != 0 ]; then
      echo "== nvcc $n ($rt cudart): build FAIL (build-$n-$rt.log)"; tail -5 "$logs/build-$n-$rt.log"; continue
    fi
    t0=$(now); "$exe" > "$logs/plain-$n-$rt.out" 2> "$logs/plain-$n-$rt.err"; prc=$?; t1=$(now)
    rdb=$w/rdb-$n-$rt
    t2=$(now); limit mneme record -rdb "$rdb" --max-recordings 2 -- "$exe" > "$logs/record-$n-$rt.out" 2> "$logs/record-$n-$rt.log"; rrc=$?; t3=$(now)
    same=SAME; diff <(stable "$logs/plain-$n-$rt.out") <(stable "$logs/record-$n-$rt.out") > /dev/null || same=DIFFERENT
    over=$(python3 -c "print(round(($t3-$t2)/max($t1-$t0,1e-6),2))")
    nok=0; nall=0; bad=""
    if [ -d "$rdb" ]; then
      mneme inspect "$rdb" > "$logs/inspect-$n-$rt.txt" 2>&1
      for id in $(ids "$rdb"); do
        nall=$((nall+1)); f=${id//\//_}
        limit mneme replay -rdb "$rdb" -rid "$id" --iterations 5 > "$logs/replay-$n-$rt-$f.json" 2> "$logs/replay-$n-$rt-$f.err"; xrc=$?
        if [ $xrc -eq 0 ]; then nok=$((nok+1))
        else bad="$bad $id(rc=$xrc: $(tail -n 1 "$logs/replay-$n-$rt-$f.err" | cut -c1-160))"; [ $xrc -eq 7 ] && taken[$n-$rt]=$(( ${taken[$n-$rt]:-0} + 1 )); fi
      done
    fi
    verified[$n-$rt]=$nok; recorded[$n-$rt]=$nall
    echo "== nvcc $n ($rt cudart): plain rc=$prc, record rc=$rrc, output $same, $nok/$nall replayed verified, wall ${over}x recorded/plain$bad"
    [ $rrc -ne 0 ] && tail -3 "$logs/record-$n-$rt.log"
  done
done

# The fixes these lines check: device variables (__device__) snapshotted
# and restored, recorded ranges held and reserved before anything else of a
# replay (no exit 7 for a range the replay itself took).
for rt in static shared; do
  [ -n "${recorded[devglobal-$rt]:-}" ] && echo "== nvcc devglobal ($rt cudart) replay with its __device__ variables restored and compared: want 1/1 verified; got ${verified[devglobal-$rt]}/${recorded[devglobal-$rt]}"
  [ -n "${recorded[thrust_sort-$rt]:-}" ] && echo "== nvcc thrust_sort ($rt cudart) replays: want ${recorded[thrust_sort-$rt]}/${recorded[thrust_sort-$rt]} verified and 0 refused for a taken range (exit 7); got ${verified[thrust_sort-$rt]}/${recorded[thrust_sort-$rt]}, ${taken[thrust_sort-$rt]:-0} exit 7"
done

# Launch statistics of a recording through the driver: every kernel that
# ran, the libraries' too, by its share of the GPU time (mneme inspect).
topstats() { mneme inspect --json "$1" 2>/dev/null | python3 -c '
import json, sys
s = json.load(sys.stdin).get("launch_stats")
if not s: print("no statistics"); sys.exit()
ks = s["kernels"]
top = "; ".join("%s %.1f%% %s" % ((k.get("demangled_name") or k["kernel_name"])[:48], 100 * k["time_share"], "recorded" if k.get("static_hash") else "not recorded") for k in ks[:4])
print("%d kernels, %d launches: %s" % (len(ks), s["launches"], top))'; }
for n in withcublas vecadd; do
  [ -d "$w/rdb-$n-static" ] && echo "== nvcc $n (static cudart) launch statistics (mneme inspect): want every kernel that ran with its time share$([ $n = withcublas ] && echo ", cuBLAS's too"); got $(topstats "$w/rdb-$n-static")"
done

# Tuning without IR: block shapes (launch safety: aggressive with
# verification), then the assembler knobs on the embedded PTX; and one
# replay of the PTX reassembled under a register cap.
summary() { python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print("trials", s.get("trials"), "statuses", s.get("statuses"), "best speedup", round(s.get("best_speedup") or 0, 3))' "$1" 2>&1 | tail -n 1; }
rdb=$w/rdb-vecadd-static
if [ -d "$rdb" ] && [ -z "${SKIP_NVCC_TUNE:-}" ]; then
  id=$(ids "$rdb" | head -1)
  limit mneme tune -rdb "$rdb" -rid "$id" --preset launch --output "$w/tune-vecadd" > "$logs/tune-vecadd.log" 2>&1; rc=$?
  echo "== nvcc tune vecadd (launch preset, machine code): rc=$rc; $(summary "$w/tune-vecadd/summary.json")"
  limit mneme tune -rdb "$rdb" -rid "$id" --preset compiler --output "$w/tune-vecadd-ptxas" > "$logs/tune-vecadd-ptxas.log" 2>&1; rc=$?
  echo "== nvcc tune vecadd (compiler preset: ptxas level and register cap on the embedded PTX): want rc=0 and no invalid_config; got rc=$rc; $(summary "$w/tune-vecadd-ptxas/summary.json")"
  limit mneme replay -rdb "$rdb" -rid "$id" --max-registers 32 > "$logs/replay-vecadd-maxreg.json" 2> "$logs/replay-vecadd-maxreg.err"; rc=$?
  echo "== nvcc replay vecadd reassembled with --max-registers 32: rc=$rc (want 0); $(grep -o '"reg_usage": [0-9]*' "$logs/replay-vecadd-maxreg.json")"
fi

# Deployment through the driver: the tuned file applied by the injection
# library (MNEME_TUNED_KERNELS, CUDA_INJECTION64_PATH) to the unmodified
# binary. The output must be the application's; MNEME_TRACE says how many
# launches ran tuned. blockprobe prints the block its kernel ran with, so
# it shows that the driver launched the tuned geometry.
inject=$prefix/lib/libmneme_inject.so
deployed() { # NAME EXE TUNED: runs EXE deployed; sets drc, dsame, dtrace
  local name=$1 exe=$2 tuned=$3 trace=$logs/deploy-$1.trace
  rm -f "$trace"
  MNEME_TRACE=$trace MNEME_TUNED_KERNELS=$tuned CUDA_INJECTION64_PATH=$inject limit "$exe" > "$logs/deploy-$name.out" 2> "$logs/deploy-$name.err"; drc=$?
  dsame=SAME; diff <(stable "$logs/plain-$name.out") <(stable "$logs/deploy-$name.out") > /dev/null || dsame=DIFFERENT
  dtrace=$(grep -o 'deploy: kernel [^ ]*: [0-9]* launch(es), [0-9]* tuned, disabled [a-z]*' "$trace" 2>/dev/null | tr '\n' ';')
}
if [ -x "$w/vecadd-static" ] && [ -z "${SKIP_NVCC_DEPLOY:-}" ]; then
  # With VECADD_TIMING, 206 launches and the program's own median time.
  export VECADD_TIMING=1
  limit "$w/vecadd-static" > "$logs/plain-vecadd-timed.out" 2>&1
  median() { grep -o 'median [0-9.]* us' "$1" | head -1; }
  if [ -f "$w/tune-vecadd/mneme_tuned_kernels.json" ]; then
    cp "$logs/plain-vecadd-timed.out" "$logs/plain-vecadd-tuned.out"
    deployed vecadd-tuned "$w/vecadd-static" "$w/tune-vecadd/mneme_tuned_kernels.json"
    echo "== nvcc deploy vecadd (the launch preset's tuned block $(python3 -c 'import json,sys; [print("%(x)s,%(y)s,%(z)s" % e["config"]["block"], end="") for e in json.load(open(sys.argv[1])).values()]' "$w/tune-vecadd/mneme_tuned_kernels.json" 2>/dev/null)): want rc=0, output SAME, 206 of 206 launches tuned; got rc=$drc, output $dsame, $dtrace in-app $(median "$logs/deploy-vecadd-tuned.out") tuned vs $(median "$logs/plain-vecadd-timed.out") plain $(tail -n 1 "$logs/deploy-vecadd-tuned.err" | cut -c1-120)"
  else
    echo "== nvcc deploy vecadd (the launch preset's tuned block): no tuned file (the baseline was best); see tune-vecadd.log"
  fi
  # A register cap: the embedded PTX reassembled in the application.
  cat > "$w/tuned-vecadd-maxreg.json" <<JSON
{"_Z6vecaddPKfS0_Pfi": {"config": {"max_registers": 32, "passes": "default<O3>", "codegen_opt": 3}, "launch_searched": false}}
JSON
  mneme deploy check --tuned "$w/tuned-vecadd-maxreg.json" "$w/vecadd-static" > "$logs/deploy-check-vecadd.out" 2>&1; rc=$?
  echo "== nvcc deploy check vecadd (max_registers 32): want rc=0, deployed, PTX reassembled; got rc=$rc, $(grep -m1 '_Z6vecadd' "$logs/deploy-check-vecadd.out" | tr -s ' ' | cut -c1-160)"
  cp "$logs/plain-vecadd-timed.out" "$logs/plain-vecadd-maxreg.out"
  deployed vecadd-maxreg "$w/vecadd-static" "$w/tuned-vecadd-maxreg.json"
  echo "== nvcc deploy vecadd (max_registers 32: its PTX reassembled in the application): want rc=0, output SAME, 206 of 206 launches tuned, 1 assembly; got rc=$drc, output $dsame, $dtrace $(grep -c 'assembled from its PTX' "$logs/deploy-vecadd-maxreg.trace" 2>/dev/null) assembly, in-app $(median "$logs/deploy-vecadd-maxreg.out") $(tail -n 1 "$logs/deploy-vecadd-maxreg.err" | cut -c1-120)"
  unset VECADD_TIMING
fi
if [ -x "$w/blockprobe-static" ] && [ -z "${SKIP_NVCC_DEPLOY:-}" ]; then
  cat > "$w/tuned-blockprobe.json" <<JSON
{"_Z5probePji": {"config": {"block": {"x": 128, "y": 1, "z": 1}, "passes": "default<O3>", "codegen_opt": 3}, "launch_searched": true,
  "recorded_block": {"x": 256, "y": 1, "z": 1}, "recorded_grid": {"x": 4096, "y": 1, "z": 1}}}
JSON
  cp "$logs/plain-blockprobe-static.out" "$logs/plain-blockprobe-deployed.out"
  deployed blockprobe-deployed "$w/blockprobe-static" "$w/tuned-blockprobe.json"
  echo "== nvcc deploy blockprobe (tuned block 128): want rc=0, 'block=128..128 covered=1048576'; got rc=$drc, $(cat "$logs/deploy-blockprobe-deployed.out") $dtrace (plain: $(cat "$logs/plain-blockprobe-static.out"))"
fi

# Bad input: a program without CUDA, and a driver without CUPTI.
limit mneme record -rdb "$w/rdb-nocuda" -- /bin/true > "$logs/record-nocuda.log" 2>&1
echo "== nvcc bad input: a program without CUDA: rc=$? ($(tail -n 1 "$logs/record-nocuda.log" | cut -c1-160))"
if [ -x "$w/vecadd-static" ]; then
  MNEME_CUPTI_LIB=/nonexistent/libcupti.so limit mneme record -rdb "$w/rdb-nocupti" -- "$w/vecadd-static" > "$logs/record-nocupti.out" 2> "$logs/record-nocupti.log"
  echo "== nvcc bad input: no CUPTI: rc=$? ($(tail -n 1 "$logs/record-nocupti.log" | cut -c1-200)); application output $(stable "$logs/record-nocupti.out" | head -1)"
fi
