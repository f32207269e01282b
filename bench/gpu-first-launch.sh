#!/usr/bin/env bash
# The first launch of a kernel launched once (examples/oneshot), untuned
# and tuned with its compiled code already in the cache: the application's
# own first launch includes loading its module, the tuned one must cost at
# most 50 us more (the runtime loads the cached code beside the
# application, started at its first allocation). Runs, in interleaved
# rounds: the plain build, the wrapped build with run-time JIT off, and
# the wrapped build with the tuned file and a warm cache; prints each
# variant's median first launch in microseconds, the tuned-minus-plain
# difference and a verdict line starting with "== ". A traced run
# (MNEME_TRACE) then says whether the tuned code ran at the first launch,
# from the shim (preloaded) or decided by the library, or whether the
# library was still loading (the application's code then runs: no penalty,
# no speedup), and prints where the time went: each step of the library's
# start, the preload of each kernel and the first launch (entry, decision,
# driver launch), in microseconds from the first launch's entry.
# Usage: gpu-first-launch.sh [WORKDIR] (default /tmp/gpu-first-launch);
# ROUNDS (default 15). Needs an NVIDIA GPU, CUDA 13 at $CUDA_PATH,
# clang++-22 and mneme on PATH (or MNEME_PREFIX_DIR, default build/).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
[ -f "$root/.gpu/env.sh" ] && source "$root/.gpu/env.sh"
prefix=${MNEME_PREFIX_DIR:-$root/build}
export PATH=$prefix/bin:$PATH
export CUDA_PATH=${CUDA_PATH:-/usr/local/cuda}
w=${1:-/tmp/gpu-first-launch}
mkdir -p "$w"
fail() { echo "== first launch oneshot: FAIL ($1)"; exit 1; }
cxx=$(command -v clang++-22 || command -v clang++) || fail "no clang++-22"
make -C "$root/examples/oneshot" BUILD="$w/plain" CXX="$cxx" >"$w/build-plain.log" 2>&1 || fail "plain build, $w/build-plain.log"
make -C "$root/examples/oneshot" BUILD="$w/wrapper" CXX="$(mneme config cxx)" >"$w/build-wrapper.log" 2>&1 || fail "wrapped build, $w/build-wrapper.log"
plain=$w/plain/oneshot wrapped=$w/wrapper/oneshot
unset MNEME_RECORD MNEME_TRACE MNEME_TUNED_KERNELS PROTEUS_TUNED_KERNELS
# The kernel's mangled name, from a recording of it.
rm -rf "$w/rdb"
mneme record -rdb "$w/rdb" --max-recordings 1 -- "$wrapped" >"$w/record.log" 2>&1 || fail "record, $w/record.log"
kernel=$(mneme inspect --json "$w/rdb" | python3 -c 'import json,sys; print(json.load(sys.stdin)["kernels"][0]["kernel_name"])') || fail "inspect"
# A tuned configuration that folds nothing: its code is keyed by the kernel
# alone, so a warm cache holds what the first launch needs.
printf '{"%s": {"config": {"passes": "default<O3>", "codegen_opt": 3}, "instance": "oneshot"}}\n' "$kernel" >"$w/tuned.json"
cache=$w/cache
rm -rf "$cache"
MNEME_TUNED_KERNELS=$w/tuned.json MNEME_CACHE_DIR=$cache MNEME_TRACE=$w/cold.trace "$wrapped" >"$w/cold.out" 2>"$w/cold.err" || fail "cold run, $w/cold.err"
grep -q ' deploy compiled ' "$w/cold.trace" || fail "the cold run compiled nothing: $(head -3 "$w/cold.err")"
first() { sed -n 's/^first launch of oneshot: \([0-9.]*\) us$/\1/p' "$1"; }
for r in $(seq "${ROUNDS:-15}"); do
  "$plain" >/dev/null 2>"$w/p.err"
  MNEME_JIT=off "$wrapped" >/dev/null 2>"$w/o.err"
  MNEME_TUNED_KERNELS=$w/tuned.json MNEME_CACHE_DIR=$cache "$wrapped" >"$w/t.out" 2>"$w/t.err"
  grep -q 'errors=0' "$w/t.out" || fail "the tuned run's output: $(cat "$w/t.out")"
  echo "$(first "$w/p.err") $(first "$w/o.err") $(first "$w/t.err")"
done >"$w/rounds.txt"
MNEME_TUNED_KERNELS=$w/tuned.json MNEME_CACHE_DIR=$cache MNEME_TRACE=$w/warm.trace "$wrapped" >/dev/null 2>&1
compiled=$(grep -c ' deploy compiled ' "$w/warm.trace")
if grep -q 'first launch of .* runs its tuned code, preloaded, from the shim' "$w/warm.trace"; then ran="its tuned code, from the shim (preloaded)"
elif grep -q 'first launch of .* runs its tuned code' "$w/warm.trace"; then ran="its tuned code, decided by the library"
elif grep -q "ran the application's code while the library loads" "$w/warm.trace"; then ran="the application's code (the library was still loading)"
else ran="unknown"; fi
preloaded=$(grep -c ' deploy preloaded ' "$w/warm.trace")
ongpu=$(grep -c ' deploy loaded .* on the GPU$' "$w/warm.trace")
# Where the time went in the traced run: every step of the library's start,
# the preload and the kernel's first launch, from the first launch's entry
# (each traced step opens and writes the trace file: a few us each).
python3 - "$w/warm.trace" <<'PY'
import re, sys
steps = re.compile(r"background|load runtime|loaded|context ready|init|preload|on the GPU|the shim runs|runtime library ready|first launch|while the library loads")
rows = []
for line in open(sys.argv[1]):
    f = line.rstrip("\n").split(" ", 3)
    if len(f) == 4 and f[0].isdigit() and steps.search(f[3]):
        rows.append((int(f[0]), f[2], f[3]))
entry = next((t for t, _, e in rows if "first launch of" in e and "entered" in e), None)
if entry is None:
    print("traced run: no first launch was traced")
    sys.exit(0)
print("traced run, us from the first launch's entry:")
for t, src, e in rows:
    print(f"  {(t - entry) / 1000:+10.1f}  {src:6} {e}")
done = [t for t, _, e in rows if "first launch of" in e and ("returned" in e or "answered" in e)]
pre = [t for t, _, e in rows if e.startswith("preload: end")]
if done:
    print(f"first launch: entry to the driver's return {(done[0] - entry) / 1000:.1f} us")
if pre:
    print(f"preload ended {(entry - pre[0]) / 1000:.1f} us before the first launch" if pre[0] <= entry
          else f"preload ended {(pre[0] - entry) / 1000:.1f} us after the first launch's entry")
PY
python3 - "$w/rounds.txt" "$ran" "$preloaded" "$compiled" "$ongpu" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if len(l.split()) == 3]
if not rows:
    print("== first launch oneshot: FAIL (no run printed its first launch)")
    sys.exit(1)
plain, off, tuned = (statistics.median(float(r[i]) for r in rows) for i in range(3))
print(f"first launch, median of {len(rows)} rounds: plain {plain:.1f} us, wrapped JIT off {off:.1f} us, tuned from the cache {tuned:.1f} us")
d = tuned - plain
verdict = "PASS" if d <= 50 else "FAIL"
print(f"== first launch oneshot: {verdict} (tuned from the cache {d:+.1f} us against the plain build, target <= +50 us; "
      f"traced run: the first launch ran {sys.argv[2]}, {sys.argv[3]} kernel(s) preloaded, {sys.argv[5]} put on the GPU by cuFuncLoad, "
      f"{sys.argv[4]} compiled)")
PY
