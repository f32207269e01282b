#!/usr/bin/env bash
# Recording production-scale runs on the GPU (scripts/gpu-test.sh calls it;
# recording an MPI job's ranks, a check, is scripts/gpu-record-ranks.sh):
#  - record_scale.py: plain vs `mneme record` whole-process time, bytes
#    copied and written, copy GB/s against the pinned bandwidth measured in
#    the same run, for the 2000-launch scalarsweep, the 4 GiB tracer (600
#    and 3000 steps) and the 9 GiB bigmem, each recording replayed, and
#    tracer built by nvcc alone, recorded through the driver (SCALE_NVCC);
#  - the 1% check: tracer's storm changes 1% of its 4 GiB allocation; its
#    epilogue must copy and write about that much;
#  - drain_contention.cu: how fast a thread of the recorder's own can move
#    device memory to the host while the application's thread waits inside
#    a launch for room in the GPU's queue, and while that thread is
#    throttled as the shim throttles it during a drain.
# Lines starting with "== " are summary lines.
# Usage: bench/gpu-record-scale.sh WORKDIR (holding plain/ and wrapper/ builds)
set -uo pipefail
w=${1:?usage: gpu-record-scale.sh WORKDIR}
logs=${LOGS:-$w/record-scale-logs}; mkdir -p "$logs"
clangxx=${CLANGXX:-$(command -v clang++-22 || command -v clang++)}
cuda=${CUDA_PATH:-/usr/local/cuda}
bench=$(cd "$(dirname "$0")" && pwd)
# build_bench NAME: compiles $bench/NAME.cu for this GPU into $logs/NAME.
build_bench() {
  "$clangxx" -x cuda --cuda-path="$cuda" --cuda-gpu-arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n1 | tr -d . | sed 's/^/sm_/')" \
    --no-offload-new-driver -Wno-unknown-cuda-version -O2 "$bench/$1.cu" -o "$logs/$1" \
    -L"$cuda/lib64" -lcudart -Wl,-rpath,"$cuda/lib64" > "$logs/$1.build.log" 2>&1
}
build_bench pinned_bw || { echo "== record scale: pinned_bw does not build (pinned_bw.build.log)"; exit 0; }
# SCALE_APPS: example names, NAME@ARG to pass the example one argument
# (tracer@3000: 3000 steps instead of 600).
apps=()
for spec in ${SCALE_APPS:-scalarsweep tracer tracer@3000 bigmem}; do
  n=${spec%@*} arg=; [ "$n" != "$spec" ] && arg=${spec#*@}
  [ -x "$w/plain/$n/$n" ] && [ -x "$w/wrapper/$n/$n" ] && apps+=("${spec/@/-}=$w/plain/$n/$n:$w/wrapper/$n/$n:$arg")
done
# The same programs built by nvcc alone (static cudart, nvcc's default),
# recorded through the driver (libmneme_inject.so): NAME-nvcc, its plain
# runs the nvcc build's own (SCALE_NVCC, default tracer; empty: none).
nvcc=$(command -v nvcc || echo "$cuda/bin/nvcc")
if [ -x "$nvcc" ]; then
  for n in ${SCALE_NVCC-tracer}; do
    src=$(ls "$bench/../examples/$n/"*.cu 2>/dev/null | head -n 1)
    [ -n "$src" ] || continue
    if "$nvcc" -O3 -arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n1 | tr -d . | sed 's/^/sm_/')" -cudart static \
      -I"$bench/../examples/common" -o "$logs/$n-nvcc" "$src" > "$logs/$n-nvcc.build.log" 2>&1; then
      apps+=("$n-nvcc=$logs/$n-nvcc:$logs/$n-nvcc:")
    else
      echo "== record scale: $n does not build with nvcc ($n-nvcc.build.log)"
    fi
  done
fi
python3 "$bench/record_scale.py" --mneme "$(command -v mneme)" --pinned-bw "$logs/pinned_bw" --runs "${SCALE_RUNS:-3}" \
  --variants "${SCALE_VARIANTS:-record}" --replay --json "$logs/record-scale.json" "${apps[@]}" 2>&1 | tee "$logs/record-scale.txt"
grep -E '^(recording overhead|copy) target' "$logs/record-scale.txt" | sed 's/^/== /'
grep '^reference' "$logs/record-scale.txt" | sed 's/^/== /'

# The 1% check: one recording of tracer, per instance the bytes copied.
if [ -x "$w/wrapper/tracer/tracer" ]; then
  rdb=$logs/tracer-rdb; rm -rf "$rdb"
  mneme record -rdb "$rdb" --max-recordings 2 -- "$w/wrapper/tracer/tracer" > "$logs/tracer-record.log" 2>&1
  python3 - "$rdb" <<'PY'
import glob, json, os, sys
rdb = sys.argv[1]
for f in sorted(glob.glob(os.path.join(rdb, "*.json"))):
    k = json.load(open(f))
    for dh, inst in k["instances"].items():
        print(f"   {k['DemangledName'][:40]:<40} {dh} prologue {inst.get('PrologueBytes', 0) / 2**20:9.1f} MiB  epilogue {inst.get('EpilogueBytes', 0) / 2**20:9.1f} MiB written (of 4096 MiB)")
PY
  tail -n 3 "$logs/tracer-record.log" | sed 's/^/   /'
  n=0; okn=0
  for id in $(mneme inspect --json "$rdb" | python3 -c 'import json,sys; [print(i["id"]) for k in json.load(sys.stdin)["kernels"] for i in k["instances"]]'); do
    n=$((n+1)); mneme replay -rdb "$rdb" -rid "$id" --iterations 3 --verify bitwise > "$logs/tracer-replay-${id//\//_}.json" 2>&1 && okn=$((okn+1))
  done
  echo "== tracer: $okn/$n instances replay bitwise from the fingerprinted recording"
fi

# Background drains beside an application that keeps the GPU's queue full.
build_bench drain_contention && "$logs/drain_contention" 2>&1 | sed 's/^/== /' ||
  echo "== drain_contention did not build or run (drain_contention.build.log)"
