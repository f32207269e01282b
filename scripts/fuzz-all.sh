#!/usr/bin/env bash
# Runs every fuzz target of the module (each `func FuzzX` in a tracked or new
# _test.go file) for FUZZTIME (default 3s), one after the other, so that
# `make test` explores past the seeds. A failing input is kept where go test
# puts it (PKG/testdata/fuzz/FuzzX/) to be rerun as a seed; the script fails
# if any target failed. FUZZ_TARGETS narrows the run (a regexp on
# "dir FuzzX"). Run through make, which sets the cgo flags LLVM needs.
set -uo pipefail
cd "$(dirname "$0")/.."
go=${GO:-go}
fuzztime=${FUZZTIME:-3s}
mapfile -t targets < <(git ls-files --cached --others --exclude-standard '*_test.go' |
  xargs grep -H -o '^func Fuzz[A-Za-z0-9_]*' |
  sed 's#^\(.*\)/[^/]*_test.go:func #\1 #; s#^[^/ ]*_test.go:func #. #' |
  grep -E "${FUZZ_TARGETS:-.}" | sort -u)
[ ${#targets[@]} -gt 0 ] || { echo "fuzz-all: no fuzz targets found"; exit 1; }
failed=()
start=$(date +%s)
for t in "${targets[@]}"; do
  dir=${t% *} name=${t#* }
  s=$(date +%s)
  out=$("$go" test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "./$dir" 2>&1)
  rc=$?
  # Go's fuzzing engine can report "context deadline exceeded" when -fuzztime
  # ends while it is still handling a new input, without any failing input
  # (no testdata file written): run such a target once more instead of
  # failing on the engine's timing.
  if [ $rc -ne 0 ] && grep -q 'context deadline exceeded' <<<"$out" && ! grep -q 'Failing input written' <<<"$out"; then
    echo "note $dir $name: the fuzzing engine hit its deadline without a failing input; running it again"
    out=$("$go" test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "./$dir" 2>&1)
    rc=$?
  fi
  if [ $rc -eq 0 ]; then
    echo "ok   $dir $name ($(( $(date +%s) - s ))s)"
  else
    echo "FAIL $dir $name"; echo "$out" | tail -n 30
    failed+=("$dir $name")
  fi
done
echo "fuzz-all: ${#targets[@]} targets, $fuzztime each, $(( $(date +%s) - start ))s"
[ ${#failed[@]} -eq 0 ] || { printf 'fuzz-all: failed: %s\n' "${failed[@]}"; exit 1; }
