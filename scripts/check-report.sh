#!/usr/bin/env bash
# Opens an optimize report in a real browser: renders report.html from a
# stored report.json of a GPU run (report/testdata/gpu-run/report.json) with
# `mneme report`, loads it in headless Chromium (Debian's package, installed
# by scripts/setup.sh), and fails unless the page's script ran to its end
# (body data-ready="1": a script error stops it before), every figure is
# there as SVG, and the browser logged no uncaught error. The screenshot is
# kept at build/report-check/report.png for people to look at.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=${REPORT_JSON:-report/testdata/gpu-run/report.json}
OUT=build/report-check
BROWSER=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
if [ -z "$BROWSER" ]; then
  echo "check-report: no chromium on PATH (scripts/setup.sh installs Debian's package)" >&2
  exit 1
fi
rm -rf "$OUT" && mkdir -p "$OUT"
# The mneme of this tree (a build/ from an earlier `make` may be stale).
MNEME=${MNEME:-$OUT/mneme}
[ -x "$MNEME" ] || ${GO:-go} build -o "$MNEME" ./cmd/mneme
cp "$SRC" "$OUT/report.json"
"$MNEME" report "$OUT" >"$OUT/summary.txt"
# Chromium in a container runs without its sandbox (no user namespaces there).
flags=(--headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run --user-data-dir="$OUT/profile")
timeout 120 "$BROWSER" "${flags[@]}" --enable-logging=stderr --v=0 --dump-dom "file://$PWD/$OUT/report.html" >"$OUT/dom.html" 2>"$OUT/console.log" || true
timeout 120 "$BROWSER" "${flags[@]}" --window-size=1200,2600 --screenshot="$OUT/report.png" "file://$PWD/$OUT/report.html" >/dev/null 2>&1 || true
fail=0
body=$(grep -o '<body[^>]*>' "$OUT/dom.html" || true)
case "$body" in
  *'data-ready="1"'*) ;;
  *) echo "check-report: the page's script did not finish (body: ${body:-none})"; fail=1 ;;
esac
want=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(2 + any(k.get("predicted_speedup",0)>0 for k in r["kernels"]) + sum(1 for k in r["kernels"] if k.get("trials")))' "$OUT/report.json")
got=$(echo "$body" | sed -n 's/.*data-figures="\([0-9]*\)".*/\1/p')
if [ "${got:-0}" != "$want" ]; then
  echo "check-report: $got figures drawn, want $want"; fail=1
fi
if grep -q 'Uncaught' "$OUT/console.log"; then
  echo "check-report: the browser logged a script error:"; grep 'Uncaught' "$OUT/console.log"; fail=1
fi
if [ ! -s "$OUT/report.png" ]; then
  echo "check-report: no screenshot"; fail=1
fi
[ $fail -eq 0 ] && echo "check-report: report.html renders in $($BROWSER --version 2>/dev/null | head -1): $got figures, script ran, screenshot $OUT/report.png"
exit $fail
