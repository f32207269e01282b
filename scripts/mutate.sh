#!/usr/bin/env bash
# Mutation testing of the packages where a wrong answer is silent: the
# snapshot and kernel readers (db), YAML spaces, presets and samplers (tune),
# the compiler wrapper's command-line parser (toolchain), IR specialization
# (llvm), argument encoding (jit) and verification (replay/internal/compare).
# Each mutant is a small change to the code (a flipped comparison, an
# off-by-one, a negated condition); a mutant the package's tests still pass
# marks behaviour no test asserts. Run through `make mutate`, which installs
# the pinned tool; MUTATE_PACKAGES narrows the run, MUTATE_WORKERS sets the
# parallelism. Reports go to $MUTATE_OUT (default .tools/mutate/), one JSON
# file and one log per package, and a score line per package at the end.
set -uo pipefail
cd "$(dirname "$0")/.."
gremlins=${GREMLINS:?GREMLINS must name the gremlins binary (make mutate sets it)}
out=${MUTATE_OUT:-.tools/mutate}
mkdir -p "$out"
# The tool times each mutant against its first, coverage run of the tests; a
# cached result makes that run instant and every mutant a timeout. It tests
# each mutant in a copy of the module elsewhere: without -trimpath the build
# cache keys packages by directory, so every copy rebuilds the cgo LLVM
# bindings, which takes longer than the timeout: every mutant of jit (and of
# any package that imports llvm) timed out.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-count=1 -trimpath"
scores=()
for pkg in ${MUTATE_PACKAGES:-toolchain db tune jit llvm replay/internal/compare}; do
  name=${pkg//\//_}
  echo "== mutating $pkg"
  "$gremlins" unleash --workers "${MUTATE_WORKERS:-2}" --timeout-coefficient 3 \
    -o "$out/$name.json" "./$pkg" > "$out/$name.log" 2>&1
  grep -E '^ *(LIVED|TIMED OUT)' "$out/$name.log"
  k=$(sed -n 's/^Killed: \([0-9]*\), Lived: \([0-9]*\).*/\1/p' "$out/$name.log")
  l=$(sed -n 's/^Killed: \([0-9]*\), Lived: \([0-9]*\).*/\2/p' "$out/$name.log")
  eff=$(sed -n 's/^Test efficacy: //p' "$out/$name.log")
  scores+=("$pkg: ${k:-?} killed, ${l:-?} lived (efficacy ${eff:-?})")
done
echo; echo "== mutation scores"; printf '%s\n' "${scores[@]}"
