#!/usr/bin/env bash
# GPU step: applications built with nvcc alone, recorded through the driver
# (libmneme_inject.so under CUDA_INJECTION64_PATH, CUPTI callbacks), with the
# static and the shared CUDA runtime; withcublas records cuBLAS's own kernels. For each program: its output plainly and
# under `mneme record` (must be the same), the recording's instances replayed
# (each must verify, bitwise, running the recorded machine code), the
# recording's wall-time overhead, and a launch-geometry tuning of the first
# instance. Also the bad inputs: a program without CUDA and a driver
# without CUPTI, each one clear error.
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
  [withcublas]="withcublas/withcublas.cu"
)
# Libraries a program links beyond the CUDA runtime.
declare -A libs=([withcublas]="-lcublas")
for n in ${NVCC_EXAMPLES:-vecadd saxpy_inplace pointers spmv stencil2d devglobal dynshared scalarsweep thrust_sort multifile withcublas}; do
  for rt in static shared; do
    exe=$w/$n-$rt
    files=(); for f in ${src[$n]}; do files+=("examples/$f"); done
    if ! "$nvcc" -O3 -arch="$arch" -cudart "$rt" -Iexamples/common -o "$exe" "${files[@]}" ${libs[$n]:-} > "$logs/build-$n-$rt.log" 2>&1; then
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
        if limit mneme replay -rdb "$rdb" -rid "$id" --iterations 5 > "$logs/replay-$n-$rt-$f.json" 2> "$logs/replay-$n-$rt-$f.err"; then nok=$((nok+1))
        else bad="$bad $id(rc=$?: $(tail -n 1 "$logs/replay-$n-$rt-$f.err" | cut -c1-160))"; fi
      done
    fi
    echo "== nvcc $n ($rt cudart): plain rc=$prc, record rc=$rrc, output $same, $nok/$nall replayed verified, wall ${over}x recorded/plain$bad"
    [ $rrc -ne 0 ] && tail -3 "$logs/record-$n-$rt.log"
  done
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
  echo "== nvcc tune vecadd (compiler preset: ptxas level and register cap on the embedded PTX): rc=$rc; $(summary "$w/tune-vecadd-ptxas/summary.json")"
  limit mneme replay -rdb "$rdb" -rid "$id" --max-registers 32 > "$logs/replay-vecadd-maxreg.json" 2> "$logs/replay-vecadd-maxreg.err"; rc=$?
  echo "== nvcc replay vecadd reassembled with --max-registers 32: rc=$rc (want 0); $(grep -o '"reg_usage": [0-9]*' "$logs/replay-vecadd-maxreg.json")"
fi

# Bad input: a program without CUDA, and a driver without CUPTI.
limit mneme record -rdb "$w/rdb-nocuda" -- /bin/true > "$logs/record-nocuda.log" 2>&1
echo "== nvcc bad input: a program without CUDA: rc=$? ($(tail -n 1 "$logs/record-nocuda.log" | cut -c1-160))"
if [ -x "$w/vecadd-static" ]; then
  MNEME_CUPTI_LIB=/nonexistent/libcupti.so limit mneme record -rdb "$w/rdb-nocupti" -- "$w/vecadd-static" > "$logs/record-nocupti.out" 2> "$logs/record-nocupti.log"
  echo "== nvcc bad input: no CUPTI: rc=$? ($(tail -n 1 "$logs/record-nocupti.log" | cut -c1-200)); application output $(stable "$logs/record-nocupti.out" | head -1)"
fi
