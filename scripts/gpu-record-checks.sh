#!/usr/bin/env bash
# GPU checks of the in-application runtime and `mneme record` (scripts/gpu-test.sh
# calls it; the recording-overhead benchmark that used to follow them is
# bench/gpu-record-overhead.sh). Run from anywhere on a machine with an NVIDIA
# GPU and CUDA 13, with a mneme prefix built by `make all PREFIX=...` (default:
# .gpu/rt, as carried to a bare GPU machine; MNEME_PREFIX_DIR overrides). Logs
# go to $LOGS (default /tmp/gpu-record-logs), packed into
# $OUT/gpu-record-logs.tgz when OUT is set.
# Steps:
#  1. every example built plainly and with the wrapper prints the same output
#     (the wrapped build not recording);
#  2. `mneme record` on each example, its output compared with the plain run,
#     and `mneme inspect` of its database;
#  3. the paths examples do not take (recordcheck.cu beside this script):
#     pitched/3D/async allocations, managed memory, an application that aborts
#     halfway, an arena too small, an application built without the wrapper
#     (recorded through the driver), per-thread default stream launches, a launch
#     captured into a CUDA graph (wrapper's and nvcc's builds).
# The last line says whether every check passed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
cd "$root"
out=${LOGS:-/tmp/gpu-record-logs}
rm -rf "$out" && mkdir -p "$out"
source scripts/gpu-prefix.sh
arch=sm_$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n1 | tr -d .)
work=${WORK:-/tmp/mneme-record-check}
rm -rf "$work" && mkdir -p "$work"
fails=0
say() { echo "== $*"; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
now() { date +%s.%N; }

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sed 's/^/GPU: /'
mneme version 2>&1 | sed 's/^/  /'

say "1. examples: plain vs wrapped build"
# Every example, whatever EXAMPLES the caller narrowed its own steps to.
EXAMPLES= examples/build-all.sh plain "$work/plain" >"$out/build-plain.log" 2>&1 || bad "plain build (build-plain.log)"
EXAMPLES= examples/build-all.sh wrapper "$work/wrap" >"$out/build-wrap.log" 2>&1 || bad "wrapper build (build-wrap.log)"
tail -n 3 "$out/build-wrap.log"
EXAMPLES= examples/run-all.sh "$work/plain" "$work/wrap" >"$out/run-all.log" 2>&1 || bad "plain and wrapped outputs (run-all.log)"
tail -n 1 "$out/run-all.log"

say "2. mneme record + inspect on every example"
for n in vecadd stencil2d spmv devglobal dynshared saxpy_inplace scalarsweep pointers; do
  exe=$work/wrap/$n/$n
  [ -x "$exe" ] || { bad "$n not built"; continue; }
  want=$("$work/plain/$n/$n" 2>/dev/null)
  t0=$(now)
  got=$(mneme record -rdb "$work/rdb/$n" --max-recordings 4 -- "$exe" 2>"$out/record-$n.err"); rc=$?
  t1=$(now)
  echo "record $n rc=$rc $(awk "BEGIN{printf \"%.2fs\", $t1-$t0}"): $(grep '^mneme' "$out/record-$n.err" | tail -n 1)"
  [ $rc -eq 0 ] || { bad "record $n rc=$rc"; tail -n 5 "$out/record-$n.err"; }
  [ "$got" = "$want" ] || bad "record $n: output differs from the plain build: '$got' vs '$want'"
  mneme inspect "$work/rdb/$n" >"$out/inspect-$n.txt" 2>&1 || bad "inspect $n"
  sed -n '3,8p' "$out/inspect-$n.txt"
done

grep -q 'arg1=2.5' "$out/inspect-saxpy_inplace.txt" || bad "saxpy_inplace: the float argument is not shown as 2.5 (kinds not analyzed?)"
ls -la "$work/rdb/saxpy_inplace"

say "3. allocation paths, managed memory, crash, small arena, per-thread stream"
cflags=(-x cuda --cuda-path="$CUDA_PATH" --cuda-gpu-arch="$arch" -I"$CUDA_PATH/include/cccl" --no-offload-new-driver -Wno-unknown-cuda-version -O3 -std=c++17)
lflags=(-L"$CUDA_PATH/lib64" -lcudart -Wl,-rpath,"$CUDA_PATH/lib64")
build() { # NAME SRC CXX [extra flags...]
  local name=$1 src=$2 cxx=$3; shift 3
  "$cxx" "${cflags[@]}" "$@" -c "$src" -o "$work/$name.o" >"$out/build-$name.log" 2>&1 &&
    "$cxx" "$work/$name.o" -o "$work/$name" "${lflags[@]}" >>"$out/build-$name.log" 2>&1 || bad "build $name (build-$name.log)"
}
build rc_plain "$here/recordcheck.cu" clang++
build rc_wrap "$here/recordcheck.cu" mneme-cxx
build rc_ptsz "$here/recordcheck.cu" mneme-cxx -fgpu-default-stream=per-thread -DCUDA_API_PER_THREAD_DEFAULT_STREAM=1
for mode in alloc managed; do
  want=$("$work/rc_plain" $mode 2>&1)
  for exe in rc_wrap rc_ptsz; do
    got=$(mneme record -rdb "$work/rdb-$exe-$mode" -- "$work/$exe" $mode 2>"$out/record-$exe-$mode.err"); rc=$?
    echo "record $exe $mode rc=$rc: $got | $(grep -c 'managed memory' "$out/record-$exe-$mode.err") managed warning(s) | $(grep '^mneme' "$out/record-$exe-$mode.err" | tail -n 1)"
    [ "$got" = "$want" ] || bad "$exe $mode output '$got' differs from plain '$want'"
    [ $rc -eq 0 ] || bad "$exe $mode rc=$rc"
    mneme inspect "$work/rdb-$exe-$mode" >"$out/inspect-$exe-$mode.txt" 2>&1 || bad "inspect $exe $mode"
  done
done
grep -q 'cudaLaunchKernel_ptsz\|_ptsz' <(nm "$work/rc_ptsz") && echo "rc_ptsz calls the _ptsz entry points: $(nm "$work/rc_ptsz" | grep -c '__wrap_.*_ptsz') wrappers linked"
# A launch captured into a graph runs as the application made it (recording
# it would synchronize inside the capture and invalidate it); the launch
# outside the capture is recorded. The wrapper's build, and nvcc's recorded
# through the driver.
want=$("$work/rc_plain" graph 2>&1)
graph_exes=(rc_wrap)
if [ -x "$CUDA_PATH/bin/nvcc" ] && "$CUDA_PATH/bin/nvcc" -O3 -arch="$arch" -o "$work/rc_nvcc" "$here/recordcheck.cu" >"$out/build-rc_nvcc.log" 2>&1; then
  graph_exes+=(rc_nvcc)
fi
for exe in "${graph_exes[@]}"; do
  got=$(mneme record -rdb "$work/rdb-$exe-graph" -- "$work/$exe" graph 2>"$out/record-$exe-graph.err"); rc=$?
  inst=$(mneme inspect --json "$work/rdb-$exe-graph" 2>/dev/null | python3 -c 'import json,sys; print(sum(len(k["instances"]) for k in json.load(sys.stdin)["kernels"]))' 2>/dev/null)
  echo "graph capture ($exe): rc=$rc, output '$got' (plain '$want'), ${inst:-?} instance(s) recorded (want 1: the launch outside the capture)"
  [ $rc -eq 0 ] && [ "$got" = "$want" ] && [ "$inst" = 1 ] || bad "graph capture ($exe): rc=$rc, output '$got' vs '$want', ${inst:-?} instance(s)"
done
mneme record -rdb "$work/rdb-crash" -- "$work/rc_wrap" crash >"$out/record-crash.out" 2>"$out/record-crash.err"; rc=$?
echo "crash: rc=$rc; $(grep '^mneme' "$out/record-crash.err" | tail -n 1)"
[ $rc -eq 134 ] || bad "crash: want the application's status 134 (SIGABRT), got $rc"
mneme inspect "$work/rdb-crash" >"$out/inspect-crash.txt" 2>&1 && echo "crash database reads back: $(grep -c scale "$out/inspect-crash.txt") line(s) naming the kernel" || bad "crash database does not read back"
ls -a "$work/rdb-crash" | grep -E '^\.' | grep -v -E '^\.\.?$|^\.mneme-record\.status$' && bad "temporary files left in the crash database"
mneme record -rdb "$work/rdb-small" -vass 0.005 -- "$work/wrap/vecadd/vecadd" >"$out/record-small.out" 2>"$out/record-small.err"; rc=$?
echo "small arena: rc=$rc; $(grep -m1 -- '-vass' "$out/record-small.err")"
[ $rc -ne 0 ] && grep -q -- '-vass' "$out/record-small.err" || bad "small arena: want a non-zero exit naming -vass"
# An application built without the wrapper (clang alone) has no embedded IR:
# it is recorded through the driver like an nvcc build, and its instance
# replays verified from machine code.
mneme record -rdb "$work/rdb-plain" -- "$work/plain/vecadd/vecadd" >/dev/null 2>"$out/record-unwrapped.err"; rc=$?
inst=$(mneme inspect --json "$work/rdb-plain" 2>/dev/null | python3 -c 'import json,sys; print(sum(len(k["instances"]) for k in json.load(sys.stdin)["kernels"]))' 2>/dev/null)
mneme replay -rdb "$work/rdb-plain" >"$out/replay-unwrapped.json" 2>"$out/replay-unwrapped.err"; rrc=$?
echo "unwrapped application (recorded through the driver): record rc=$rc, ${inst:-?} instance(s), replay rc=$rrc (want 0, 1, 0)"
[ $rc -eq 0 ] && [ "$inst" = 1 ] && [ $rrc -eq 0 ] || bad "unwrapped application: record rc=$rc, ${inst:-?} instance(s), replay rc=$rrc (record-unwrapped.err, replay-unwrapped.err)"
mneme record -rdb "$work/rdb-sel" --kernels '^relax' --skip 10 --max-recordings 2 -- "$work/wrap/scalarsweep/scalarsweep" >/dev/null 2>"$out/record-sel.err"; rc=$?
echo "selection (--kernels ^relax --skip 10 --max-recordings 2): rc=$rc; $(grep '^mneme' "$out/record-sel.err" | head -n 1)"
mneme inspect "$work/rdb-sel" 2>&1 | grep -E 'relax|KERNEL'
mneme record -rdb "$work/rdb-raw" --zstd=false -- "$work/wrap/stencil2d/stencil2d" >/dev/null 2>"$out/record-raw.err"; rc=$?
echo "stencil2d with --zstd=false: rc=$rc; $(grep '^mneme' "$out/record-raw.err" | head -n 2 | tr '\n' ' ')"
echo "stencil2d with zstd (default): $(grep '^mneme' "$out/record-stencil2d.err" | head -n 2 | tr '\n' ' ')"
du -sh "$work/rdb/stencil2d" "$work/rdb-raw"

[ -n "${OUT:-}" ] && tar -czf "$OUT/gpu-record-logs.tgz" -C "$out" .
echo
[ $fails -eq 0 ] && echo "gpu-record-checks: all checks passed" || { echo "gpu-record-checks: $fails failure(s)"; exit 1; }
