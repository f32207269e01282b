#!/usr/bin/env bash
# Per-launch cost of the shim on the GPU: launch_bench.cu (an empty kernel
# launched N times back to back, its argument changing every launch) built
# plainly with clang++ and with the mneme compilers, run in interleaved
# rounds: plainly, wrapped and not recording, and wrapped under `mneme
# record` with the kernel not selected, so every launch is forwarded in C
# and counted in the launch statistics (its shape, its argument, a timed
# sample with events). Each round's wrapped-minus-plain time per launch is
# the shim's cost when not recording, recording-minus-wrapped what recording
# adds to a launch it does not record; the last two lines give their
# medians over the rounds in nanoseconds (the target for the statistics:
# at most 100 ns).
# Needs an NVIDIA GPU, CUDA 13 at $CUDA_PATH (default /usr/local/cuda), clang++-22
# and a mneme prefix (MNEME_PREFIX_DIR, default build/) with bin/mneme-cxx.
# LAUNCHES (default 200000) and ROUNDS (default 11) size the run; logs go to
# $LOGS (default /tmp/gpu-launch-cost).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
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
# Recording, with nothing selected: `mneme record` says so and exits 1,
# after the application printed its time.
rec_us() {
  rm -rf "$out/rdb"
  mneme record -rdb "$out/rdb" --kernels '^no kernel$' -- "$out/wrapped" "${LAUNCHES:-200000}" 2>>"$out/record.err" |
    sed -n 's/^\([0-9.]*\) us\/launch.*/\1/p'
}
unset MNEME_RECORD
for r in $(seq "${ROUNDS:-11}"); do
  p=$(us plain); w=$(us wrapped); c=$(rec_us)
  [ -n "$p" ] && [ -n "$w" ] && [ -n "$c" ] || { echo "per-launch cost: FAIL (a run printed no time; $out/record.err)"; exit 1; }
  echo "round $r: plain $p us, wrapped $w us, recording (not selected) $c us per launch" | tee -a "$out/rounds.txt" >&2
  echo "$p $w $c"
done >"$out/pairs.txt"
# The statistics file of the last recording must hold every launch.
python3 - "$out/rdb/LaunchStats.mnemestats" "${LAUNCHES:-200000}" <<'PY' || { echo "per-launch cost: FAIL (launch statistics of the recording: see above)"; exit 1; }
import json, sys
s = json.load(open(sys.argv[1]))
k = [k for k in s["Kernels"] if "empty" in k["KernelName"]][0]
want = 5 * int(sys.argv[2]) + 1  # a warm-up launch, then 5 rounds
assert s["Complete"] and k["Launches"] == want, f"launches {k['Launches']}, want {want}"
assert k["TimedLaunches"] > 0 and k["GPUTimeNs"] > 0, "no launch was timed"
print(f"launch statistics: {k['Launches']} launches counted, {k['TimedLaunches']} timed, mean {k['TimedNs'] / k['TimedLaunches']:.0f} ns", file=sys.stderr)
PY
python3 - "$out/pairs.txt" <<'PY'
import statistics, sys
rows = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
med = lambda xs: statistics.median(list(xs))
diff = [(w - p) * 1000 for p, w, _ in rows]
rec = [(c - w) * 1000 for _, w, c in rows]
print(f"per-launch cost of the shim when not recording (GPU): {med(diff):.1f} ns "
      f"(median of {len(diff)} interleaved rounds, range {min(diff):.1f} to {max(diff):.1f} ns; "
      f"plain {med(p for p, _, _ in rows):.3f} us, wrapped {med(w for _, w, _ in rows):.3f} us per launch)")
print(f"per-launch cost of recording a launch it does not record, launch statistics included (GPU): {med(rec):.1f} ns "
      f"(target <= 100 ns; median of {len(rec)} interleaved rounds, range {min(rec):.1f} to {max(rec):.1f} ns; "
      f"recording {med(c for _, _, c in rows):.3f} us per launch)")
PY
