#!/usr/bin/env bash
# Mutation testing of the packages where a wrong answer is silent: the
# snapshot and kernel readers (db), deployment keys and plans and the
# in-application deployment policy (deploy), YAML
# spaces, presets and samplers (tune), the compiler wrapper's command-line
# parser (toolchain), IR specialization (llvm), argument encoding (jit) and
# verification (replay/internal/compare). Each mutant is a small change to
# the code (a flipped comparison, an off-by-one, a negated condition, && for
# ||); a mutant the package's tests still pass marks behaviour no test
# asserts. Run through `make mutate`, which installs the pinned tool;
# MUTATE_PACKAGES narrows the run, MUTATE_WORKERS sets the parallelism,
# MUTATE_OPERATORS the operators enabled besides the tool's defaults. Reports
# go to $MUTATE_OUT (default .tools/mutate/), one JSON file and one log per
# package; each pass prints its killed and lived mutants per operator, and a
# score line per package closes the run.
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
# A mutant of a cgo package (llvm) recompiles its C++ too, unchanged: through
# ccache (when installed) that is a cache hit. cgo passes a per-build random
# seed and build-directory prefix maps, which do not change the object. The
# cache stays in ccache's own folder: gremlins copies the module for every
# worker, and a cache being written inside it breaks the copy.
if command -v ccache >/dev/null && [ -z "${MUTATE_NO_CCACHE:-}" ]; then
  export CC="ccache ${CC:-gcc}" CXX="ccache ${CXX:-g++}" CCACHE_NOHASHDIR=1 \
    CCACHE_IGNOREOPTIONS="-ffile-prefix-map=* -frandom-seed=*"
fi
# Mutant operators enabled on top of gremlins' defaults (arithmetic,
# comparison boundaries and negations, ++/--, negated values): && and ||
# swapped (a shortcut taken when one side of a pair holds instead of both),
# break and continue swapped, compound assignments inverted or made plain
# (+= as -= or =), bitwise operators and shifts inverted (hashing, flags,
# encodings). MUTATE_OPERATORS replaces the list (gremlins' flag names,
# without the dashes).
operators=${MUTATE_OPERATORS-invert-logical invert-loopctrl invert-assignments invert-bitwise invert-bwassign remove-self-assignments}
echo "== operators enabled besides gremlins' defaults: ${operators:-none}"
# byOperator prints a report's killed and lived mutants per operator.
byOperator() {
  python3 - "$1" <<'PY'
import collections, json, sys
try:
    report = json.load(open(sys.argv[1]))
except (OSError, ValueError) as e:
    print(f"   (no report: {e})")
    sys.exit(0)
counts = collections.defaultdict(collections.Counter)
for f in report.get("files") or []:
    for m in f.get("mutations") or []:
        counts[m["type"]][m["status"]] += 1
for op in sorted(counts):
    c = counts[op]
    print(f"   {op}: {c['KILLED']} killed, {c['LIVED']} lived" + (f", {c['TIMED OUT']} timed out" if c['TIMED OUT'] else ""))
PY
}
scores=()
# A pass is PACKAGE[:FILES[:short]]: FILES, a regular expression, keeps the
# mutants to the files whose names it matches; short runs the package's tests
# with -short, which skips the few that wait seconds on timeouts (tune's
# executor and study tests; they exercise no sampler or space code). tune is
# split so that its sampler pass is fast and its orchestration code still
# meets its slow tests; llvm's pass keeps to IR specialization (arguments,
# dimensions, annotations), where a wrong answer is a silent miscompile; a
# mutant there costs a cgo build.
default_passes="toolchain db deploy tune:^(sampler|tpe|space|yamlspace|presets|param|launchsafety)\.go$:short tune:^(study|results|run|executor|protocol|limits)\.go$ jit llvm:^(specialize|annotations)\.go$ replay/internal/compare"
for pass in ${MUTATE_PACKAGES:-$default_passes}; do
  IFS=: read -r pkg files short <<<"$pass"
  name=${pkg//\//_}
  # The tool times a mutant out at this multiple of its coverage run. A
  # mutant of llvm rebuilds the cgo package (seconds, even with ccache),
  # which the coverage run, built before it, did not: it gets more.
  coef=3
  [ "$pkg" = llvm ] && coef=20
  flags=(--workers "${MUTATE_WORKERS:-2}" --timeout-coefficient "$coef")
  for op in $operators; do flags+=("--$op"); done
  gof=$GOFLAGS
  if [ -n "$files" ]; then
    # gremlins takes files to leave out: every Go file of the package the
    # pass does not name.
    for f in "$pkg"/*.go; do
      b=$(basename "$f")
      [[ $b == *_test.go ]] && continue
      [[ $b =~ $files ]] || flags+=(--exclude-files "(^|/)${b//./\\.}$")
    done
    name+="_$(printf '%s' "$files" | md5sum | cut -c1-6)"
  fi
  [ "$short" = short ] && gof="$gof -short"
  echo "== mutating $pkg${files:+ (files $files)}${short:+ (-short)}"
  GOFLAGS=$gof "$gremlins" unleash "${flags[@]}" -o "$out/$name.json" "./$pkg" > "$out/$name.log" 2>&1
  grep -E '^ *(LIVED|TIMED OUT)' "$out/$name.log"
  byOperator "$out/$name.json"
  k=$(sed -n 's/^Killed: \([0-9]*\), Lived: \([0-9]*\).*/\1/p' "$out/$name.log")
  l=$(sed -n 's/^Killed: \([0-9]*\), Lived: \([0-9]*\).*/\2/p' "$out/$name.log")
  eff=$(sed -n 's/^Test efficacy: //p' "$out/$name.log")
  scores+=("$pkg${files:+ ($files)}: ${k:-?} killed, ${l:-?} lived (efficacy ${eff:-?})")
done
echo; echo "== mutation scores"; printf '%s\n' "${scores[@]}"
