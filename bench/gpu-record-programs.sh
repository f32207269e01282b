#!/usr/bin/env bash
# Recording overhead on programs that are not in this repository (public
# benchmark suites, a user's own code): each is built plainly and with the
# mneme wrapper, then record_scale.py runs both interleaved, prints plain and
# recording wall times, bytes copied and written and the copy rate against
# the pinned bandwidth measured in the same run, and replays every instance
# of the last recording.
#
# Usage: bench/gpu-record-programs.sh DIR [NAME...]
#   DIR holds one folder per program, NAME/, with
#     NAME/Makefile  building BUILD/NAME; it must honour CXX and BUILD given
#                    on the make command line (CUDA and ARCH are passed too);
#     NAME/RUN       the program's arguments on its first line that does not
#                    start with '#'.
#   NAMEs pick programs (default: every folder with a Makefile and a RUN).
# Environment: RUNS (interleaved rounds, default 3), MAX_RECORDINGS (default
# 2), WORK (build and log folder, default /tmp/mneme-record-programs), CLANGXX
# (the plain compiler, default clang++-22, else clang++), CUDA_PATH.
# Programs run from WORK, so relative output files land there.
set -uo pipefail
dir=${1:?usage: gpu-record-programs.sh DIR [NAME...]}
shift
dir=$(cd "$dir" && pwd) || exit 2
bench=$(cd "$(dirname "$0")" && pwd)
work=${WORK:-/tmp/mneme-record-programs}
cuda=${CUDA_PATH:-/usr/local/cuda}
clangxx=${CLANGXX:-$(command -v clang++-22 || command -v clang++)}
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d . | sed -n 's/^\([0-9][0-9]*\)$/sm_\1/p')
command -v mneme >/dev/null || { echo "gpu-record-programs: mneme is not on PATH" >&2; exit 2; }
mkdir -p "$work"

names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for d in "$dir"/*/; do
    n=$(basename "$d")
    [ -f "$d/Makefile" ] && [ -f "$d/RUN" ] && names+=("$n")
  done
fi
[ ${#names[@]} -gt 0 ] || { echo "gpu-record-programs: no program folders (NAME/Makefile and NAME/RUN) in $dir" >&2; exit 2; }

apps=()
for n in "${names[@]}"; do
  src=$dir/$n
  [ -f "$src/Makefile" ] && [ -f "$src/RUN" ] || { echo "== $n: no Makefile or RUN in $src"; continue; }
  args=$(grep -v '^#' "$src/RUN" | head -n 1)
  ok=1
  for mode in plain wrapper; do
    cxx=$clangxx
    [ $mode = wrapper ] && cxx=$(mneme config cxx)
    log=$work/$n.$mode.build.log
    if ! make -C "$src" BUILD="$work/$mode/$n" CXX="$cxx" CUDA="$cuda" ${arch:+ARCH=$arch} >"$log" 2>&1 || [ ! -x "$work/$mode/$n/$n" ]; then
      echo "== $n: the $mode build failed ($log)"; tail -n 15 "$log" | sed 's/^/   /'; ok=0
    fi
  done
  [ $ok = 1 ] && apps+=("$n=$work/plain/$n/$n:$work/wrapper/$n/$n:$args")
done
[ ${#apps[@]} -gt 0 ] || { echo "gpu-record-programs: nothing built" >&2; exit 1; }

"$clangxx" -x cuda --cuda-path="$cuda" --cuda-gpu-arch="${arch:-sm_90}" --no-offload-new-driver -Wno-unknown-cuda-version -O2 \
  "$bench/pinned_bw.cu" -o "$work/pinned_bw" -L"$cuda/lib64" -lcudart -Wl,-rpath,"$cuda/lib64" >"$work/pinned_bw.build.log" 2>&1 ||
  { echo "gpu-record-programs: pinned_bw does not build ($work/pinned_bw.build.log)" >&2; exit 1; }
cd "$work" && python3 "$bench/record_scale.py" --mneme "$(command -v mneme)" --pinned-bw "$work/pinned_bw" --runs "${RUNS:-3}" \
  --max-recordings "${MAX_RECORDINGS:-2}" --replay --json "$work/record-programs.json" "${apps[@]}"
