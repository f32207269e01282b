#!/usr/bin/env bash
# Builds every example. Usage: examples/build-all.sh MODE OUTDIR
#   plain        the example Makefiles with clang-22
#   wrapper      the example Makefiles with CXX=$(mneme config cxx)
#   cmake        CMake with MNEME=ON (find_package(mneme) + add_mneme)
#   cmake-plain  CMake without mneme
# Each example's executable lands in OUTDIR/<name>/<name>. Environment: MNEME (the
# mneme binary, default: mneme on PATH), CLANGXX (default clang++-22, else clang++),
# CUDA_PATH (default /usr/local/cuda). Exits non-zero if any example fails to build.
set -uo pipefail
mode=${1:?usage: build-all.sh plain|wrapper|cmake|cmake-plain OUTDIR}
out=${2:?usage: build-all.sh MODE OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out" && out=$(cd "$out" && pwd)
mneme=${MNEME:-mneme}
clangxx=${CLANGXX:-$(command -v clang++-22 || command -v clang++ || echo clang++-22)}
examples=${EXAMPLES:-"vecadd stencil2d spmv devglobal dynshared saxpy_inplace scalarsweep pointers microphys nbody_dp histo_atomic tiled_matmul bigmem jitspec tracer withcublas heat2d oneshot sizesweep managed gridstride"}
failed=()
for n in $examples; do
  log="$out/$n.build.log"
  case $mode in
  plain) make -C "$here/$n" BUILD="$out/$n" CXX="$clangxx" >"$log" 2>&1 ;;
  wrapper) make -C "$here/$n" BUILD="$out/$n" CXX="$("$mneme" config cxx)" >"$log" 2>&1 ;;
  cmake | cmake-plain)
    flags=(-DCMAKE_CUDA_COMPILER="$clangxx" -DCMAKE_CXX_COMPILER="$clangxx" -DCMAKE_BUILD_TYPE=Release)
    if [ "$mode" = cmake ]; then flags+=(-DMNEME=ON -Dmneme_DIR="$("$mneme" config cmakedir)"); fi
    { cmake -S "$here/$n" -B "$out/$n" "${flags[@]}" && cmake --build "$out/$n" -j 4; } >"$log" 2>&1 ;;
  *) echo "unknown mode $mode (want plain, wrapper, cmake or cmake-plain)" >&2; exit 2 ;;
  esac
  if [ $? -eq 0 ] && [ -x "$out/$n/$n" ]; then echo "built $n ($mode)"; else failed+=("$n"); echo "FAILED $n ($mode): see $log" >&2; tail -n 20 "$log" >&2; fi
done
[ ${#failed[@]} -eq 0 ] || { echo "build-all $mode: failed: ${failed[*]}" >&2; exit 1; }
