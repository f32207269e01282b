#!/usr/bin/env bash
# Per-launch cost of the shim when not recording, on the GPU: launch_bench.cu
# (an empty kernel launched N times back to back) built plainly with clang++
# and with the mneme compilers, the two run in interleaved rounds; each
# round's wrapped-minus-plain time per launch is the shim's cost, and the
# last line gives the median over the rounds in nanoseconds.
# Needs an NVIDIA GPU, CUDA 13 at $CUDA_PATH (default /usr/local/cuda), clang++-22
# and a mneme prefix (MNEME_PREFIX_DIR, default build/) with bin/mneme-cxx.
# LAUNCHES (default 200000) and ROUNDS (default 11) size the run; logs go to
# $LOGS (default /tmp/gpu-launch-cost).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
cd "$root"
[ -f .gpu/env.sh ] && source .gpu/env.sh
prefix=${MNEME_PREFIX_DIR:-$root/build}
export PATH=$prefix/bin:$PATH
export CUDA_PATH=${CUDA_PATH:-/usr/local/cuda}
out=${LOGS:-/tmp/gpu-launch-cost}
rm -rf "$out" && mkdir -p "$out"
cxx=$(command -v clang++-22 || command -v clang++) || { echo "per-launch cost: FAIL (no clang++-22)"; exit 1; }
arch=sm_$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n1 | tr -d .)
cflags=(-x cuda --cuda-path="$CUDA_PATH" --cuda-gpu-arch="$arch" -I"$CUDA_PATH/include/cccl" --no-offload-new-driver -Wno-unknown-cuda-version -O3 -std=c++17)
lflags=(-L"$CUDA_PATH/lib64" -lcudart -Wl,-rpath,"$CUDA_PATH/lib64")
build() { # NAME COMPILER
  "$2" "${cflags[@]}" -c "$here/launch_bench.cu" -o "$out/$1.o" >"$out/build-$1.log" 2>&1 &&
    "$2" "$out/$1.o" -o "$out/$1" "${lflags[@]}" >>"$out/build-$1.log" 2>&1 ||
    { echo "per-launch cost: FAIL (build $1, $out/build-$1.log)"; exit 1; }
}
build plain "$cxx"
build wrapped mneme-cxx
# The wrapped binary must hold the shim, or the difference measures nothing.
nm "$out/wrapped" | grep -q '__wrap_cudaLaunchKernel' || { echo "per-launch cost: FAIL (the wrapped build has no __wrap_cudaLaunchKernel)"; exit 1; }
us() { "$out/$1" "${LAUNCHES:-200000}" | sed -n 's/^\([0-9.]*\) us\/launch.*/\1/p'; }
unset MNEME_RECORD
for r in $(seq "${ROUNDS:-11}"); do
  p=$(us plain); w=$(us wrapped)
  [ -n "$p" ] && [ -n "$w" ] || { echo "per-launch cost: FAIL (a run printed no time)"; exit 1; }
  echo "round $r: plain $p us, wrapped $w us per launch" | tee -a "$out/rounds.txt" >&2
  echo "$p $w"
done >"$out/pairs.txt"
python3 - "$out/pairs.txt" <<'PY'
import statistics, sys
pairs = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
diff = [(w - p) * 1000 for p, w in pairs]
print(f"per-launch cost of the shim when not recording (GPU): {statistics.median(diff):.1f} ns "
      f"(median of {len(diff)} interleaved rounds, range {min(diff):.1f} to {max(diff):.1f} ns; "
      f"plain {statistics.median(p for p, _ in pairs):.3f} us, wrapped {statistics.median(w for _, w in pairs):.3f} us per launch)")
PY
