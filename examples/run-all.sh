#!/usr/bin/env bash
# Runs every example built by build-all.sh in each OUTDIR given and checks that
# each exits 0 and prints the same stdout in every build (plain vs wrapper vs
# CMake). Kernel timer lines ("kernel NAME: median X us over N launches", see
# README.md) vary from run to run: they are shown but left out of the
# comparison. Usage: examples/run-all.sh OUTDIR...
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: run-all.sh OUTDIR..." >&2; exit 2; }
examples=${EXAMPLES:-"vecadd stencil2d spmv devglobal dynshared saxpy_inplace scalarsweep pointers microphys nbody_dp histo_atomic tiled_matmul bigmem jitspec tracer withcublas heat2d oneshot sizesweep managed gridstride"}
timer='^kernel [A-Za-z_][A-Za-z0-9_]*: median [0-9]+\.[0-9]+ us over [0-9]+ launches$'
bad=0
for n in $examples; do
  ref=""
  for dir in "$@"; do
    exe="$dir/$n/$n"
    if [ ! -x "$exe" ]; then echo "MISSING $exe"; bad=1; continue; fi
    out=$("$exe" 2>"$dir/$n.stderr"); rc=$?
    got=$(grep -Ev "$timer" <<<"$out")
    echo "$(basename "$dir") $n rc=$rc: $got"
    grep -E "$timer" <<<"$out" | sed 's/^/  /'
    if [ $rc -ne 0 ]; then bad=1; sed 's/^/  stderr: /' "$dir/$n.stderr"; fi
    if [ -z "$ref" ]; then ref=$got; elif [ "$got" != "$ref" ]; then echo "DIFFERS from $1: $n"; bad=1; fi
  done
done
[ $bad -eq 0 ] && echo "run-all: all examples passed and agree" || { echo "run-all: FAILURES" >&2; exit 1; }
