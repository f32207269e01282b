#!/usr/bin/env bash
# The main job: build examples/vecadd with the mneme compiler wrapper, record it,
# replay and tune its kernel, print the best configuration and speedup, and run
# the application with its tuned kernel (MNEME_TUNED_KERNELS), printing the
# application's own kernel time before and after.
# Without a GPU it does everything up to the first GPU step (build, compile the
# recorded kernel's IR to PTX) and then says that a GPU is needed.
set -euo pipefail
cd "$(dirname "$0")/.."
# MNEME names a prebuilt mneme (e.g. a GPU machine without Go); else build it here.
if [ -z "${MNEME:-}" ]; then make all >/dev/null; fi
mneme=${MNEME:-$PWD/build/bin/mneme}
work=$PWD/build/quickstart
rm -rf "$work" && mkdir -p "$work"
step() { printf '\n== %s\n' "$*"; }

cuda=${CUDA_PATH:-/usr/local/cuda}
if [ ! -f "$cuda/include/cuda_runtime.h" ]; then
  step "no CUDA toolkit at $cuda: assembling headers and libcudart from NVIDIA's PyPI wheels"
  cuda=$(toolchain/scripts/local-cuda.sh "$PWD/build/cuda")
fi
export CUDA_PATH=$cuda

step "1. build examples/vecadd with the wrapper ($("$mneme" config cxx))"
make -s -C examples/vecadd BUILD="$work/vecadd" CUDA="$cuda" CXX="$("$mneme" config cxx)"
app=$work/vecadd/vecadd

step "2. compile the kernel's embedded IR as replay will (PTX, stage times)"
"$mneme" compile --ir "$app" --json -o "$work/vecadd.ptx"
echo "PTX: $work/vecadd.ptx ($(grep -c . "$work/vecadd.ptx") lines)"

if ! "$mneme" version | grep -q '^CUDA driver API'; then
  step "A GPU is needed from here on"
  echo "No CUDA driver was found on this machine, so the application cannot run and nothing can be"
  echo "recorded, replayed or tuned. On a machine with an NVIDIA GPU, run this script again."
  exit 0
fi

step "3. run the application under mneme record"
"$mneme" record -rdb "$work/rdb" -- "$app"

step "4. the recording"
"$mneme" inspect "$work/rdb"

step "5. replay the recorded kernel (baseline configuration, verified against the recording)"
"$mneme" replay -rdb "$work/rdb" --iterations 20 --warmup 3 > "$work/replay.json"
python3 - "$work/replay.json" <<'PY'
import json, statistics, sys
d = json.load(open(sys.argv[1])); r = d["Result"]
print(f"verified={r['verified']} timer={r.get('timer')} median={statistics.median(r['exec_time'])/1000:.2f} us "
      f"registers={r['reg_usage']} gpu={r.get('gpu_name')}")
PY

step "6. tune: exhaustive over 5 pipelines x blockDim.x 64..1024 step 64"
"$mneme" tune -rdb "$work/rdb" --space examples/vecadd/tune-80.yaml --sampler exhaustive --iterations 7 --output "$work/tune"
echo; echo "best configuration and speedup ($work/tune/best.json):"
python3 - "$work/tune/best.json" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))["best"]; c = b["config"]
print("block %d, grid %d, passes %s: %.2f us, speedup %.3fx over the recorded configuration"
      % (c["block"]["x"], c["grid"]["x"], c["passes"], b["time_ns"] / 1000, b["speedup"]))
PY

step "7. deploy: run the unmodified application with its tuned kernel"
"$mneme" deploy check "$app" --tuned "$work/tune/mneme_tuned_kernels.json"
export MNEME_CACHE_DIR=$work/deploy-cache
before=$(VECADD_TIMING=1 MNEME_JIT=off "$app" | sed -n 's/^kernel vecadd: median \([0-9.]*\) us.*/\1/p')
VECADD_TIMING=1 MNEME_TUNED_KERNELS="$work/tune/mneme_tuned_kernels.json" "$app" > /dev/null # first run: compiles, fills the cache
after=$(VECADD_TIMING=1 MNEME_TUNED_KERNELS="$work/tune/mneme_tuned_kernels.json" "$app" | sed -n 's/^kernel vecadd: median \([0-9.]*\) us.*/\1/p')
python3 - "$before" "$after" <<'PY'
import sys
b, a = (float(x) for x in sys.argv[1:3])
print(f"application's own timer: {b:.2f} us before, {a:.2f} us with the tuned kernel ({b / a:.3f}x)")
PY
