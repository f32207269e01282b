#!/usr/bin/env bash
# GPU checks of the Python API on a recorded vector-add kernel:
#   (a) exhaustive tuning of the 80-configuration space (blockDim.x 64..1024
#       step 64 x 5 pipelines) with one worker, as a user's tune script does
#       it; prints configurations/s and fails below 50/s;
#   (b) an Optuna TPE study (40 trials, SQLite storage);
#   (c) the exhaustive space on two workers (GPUs 0 and 1, or both on GPU 0
#       when the machine has one GPU);
#   (d) Mneme's published tuning scripts and config files, unchanged
#       (python/mneme_scripts.py), from the copies in $MNEME_SCRIPTS (default
#       .mneme-published at the repository root; never committed): one line
#       "== mneme script NAME: PASS/FAIL (best config ...)" each, or one SKIP
#       line without the copies.
#
# Usage: python/gpu-checks.sh RECORD_DB [MNEME_BIN]
#   RECORD_DB  the vector-add kernel's JSON file, or a recording folder (the
#              JSON whose KernelName mentions vecadd is taken)
#   MNEME_BIN  the mneme binary (default: $MNEME_BIN, then PATH, then build/bin/mneme)
# Environment: PYTHON (default python3), GPU_CHECKS_OUT (default
# gpu-test-logs/python), MNEME_WHEELS (default .gpu/wheels, made by
# python/bundle-wheels.sh on a networked machine; used when optuna is missing),
# MNEME_SCRIPTS, MNEME_SCRIPTS_TRIALS (--num-trials where a script asks, default 40),
# MNEME_GRID_STRIDE_DB (a recorded grid-stride kernel, examples/gridstride, for
# the scripts whose space shrinks the grid; without it they get RECORD_DB),
# MNEME_SCRIPTS_TIMEOUT (seconds per script, default 300).
set -uo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
[ $# -ge 1 ] || { sed -n '2,25p' "$0"; exit 2; }
db="$1"
[ $# -ge 2 ] && export MNEME_BIN="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
py="${PYTHON:-python3}"
out="${GPU_CHECKS_OUT:-$repo/gpu-test-logs/python}"
wheels="${MNEME_WHEELS:-$repo/.gpu/wheels}"
mkdir -p "$out"

# Python environment: the package from the source tree; optuna from the
# bundled wheels when the interpreter lacks it (the GPU machine has no network).
export PYTHONPATH="$repo/python${PYTHONPATH:+:$PYTHONPATH}"
if ! "$py" -c 'import optuna' 2>/dev/null; then
  [ -d "$wheels" ] || { echo "optuna is not installed and $wheels is missing: run python/bundle-wheels.sh on a networked machine"; exit 1; }
  venv="$repo/.gpu/pyvenv"
  if "$py" -m venv --system-site-packages "$venv" >"$out/venv.log" 2>&1 &&
     "$venv/bin/python" -m pip install --quiet --no-index --find-links "$wheels" optuna >>"$out/venv.log" 2>&1; then
    py="$venv/bin/python"
  else
    # No venv module or pip: the wheels are zip files with nothing to build,
    # so unpacking them onto PYTHONPATH is an installation.
    echo "venv/pip unavailable (see $out/venv.log); unpacking the wheels instead"
    lib="$repo/.gpu/pylib"
    mkdir -p "$lib"
    "$py" -c 'import sys, zipfile, glob; [zipfile.ZipFile(w).extractall(sys.argv[2]) for w in glob.glob(sys.argv[1] + "/*.whl")]' "$wheels" "$lib"
    export PYTHONPATH="$PYTHONPATH:$lib"
  fi
fi
"$py" -c 'import optuna, mneme; print("python", __import__("sys").version.split()[0], "optuna", optuna.__version__, "mneme", mneme.__version__, "binary", mneme.find_mneme_binary())' || exit 1

if [ -d "$db" ]; then
  db="$("$py" - "$db" <<'PY'
import json, pathlib, sys
files = sorted(pathlib.Path(sys.argv[1]).glob("*.json"))
pick = [f for f in files if "vecadd" in json.loads(f.read_text()).get("KernelName", "")] or files
print(pick[0] if pick else "")
PY
)"
  [ -n "$db" ] || { echo "no kernel JSON in $1"; exit 1; }
fi
echo "recording: $db"

gpus="$(nvidia-smi -L 2>/dev/null | wc -l)"
status=0
check() {  # name, command...
  local name="$1"; shift
  echo "== $name"
  if "$@" >"$out/$name.log" 2>&1; then
    grep -E 'configurations/s|BEST|baseline' "$out/$name.log"
    echo "PASS $name"
  else
    tail -20 "$out/$name.log"
    echo "FAIL $name (log: $out/$name.log)"
    status=1
  fi
}
ex="$repo/python/examples"
check exhaustive "$py" "$ex/tune_vecadd.py" --record-db "$db" --results-dir "$out/exhaustive" --quiet
rate="$(sed -n 's/.*: \([0-9.]*\) configurations\/s.*/\1/p' "$out/exhaustive.log")"
if [ -n "$rate" ] && "$py" -c "import sys; sys.exit(0 if float('$rate') >= 50 else 1)"; then
  echo "PASS exhaustive-rate ($rate configurations/s >= 50)"
else
  echo "FAIL exhaustive-rate (${rate:-no} configurations/s, want >= 50)"; status=1
fi
rm -f "$out/study.db"
check optuna-tpe "$py" "$ex/tune_vecadd_optuna.py" --record-db "$db" --trials 40 \
  --storage "sqlite:///$out/study.db" --results-dir "$out/optuna"
if [ "$gpus" -ge 2 ]; then two="0,1"; else two="0"; echo "(one GPU: both workers on GPU 0)"; fi
check two-workers "$py" "$ex/tune_vecadd.py" --record-db "$db" --workers 2 --gpus "$two" \
  --results-dir "$out/two-workers" --quiet

# Mneme's published scripts, each in its own folder under $out/mneme-scripts;
# `mneme tune --space-module` runs this interpreter (MNEME_PYTHON).
copies="${MNEME_SCRIPTS:-$repo/.mneme-published}"
if [ -f "$copies/SOURCE" ]; then
  stride=()
  [ -n "${MNEME_GRID_STRIDE_DB:-}" ] && stride=(--grid-stride-db "$MNEME_GRID_STRIDE_DB")
  MNEME_PYTHON="$py" "$py" "$repo/python/mneme_scripts.py" --copies "$copies" --record-db "$db" "${stride[@]}" \
    --out "$out/mneme-scripts" --trials "${MNEME_SCRIPTS_TRIALS:-40}" --timeout "${MNEME_SCRIPTS_TIMEOUT:-300}" || status=1
else
  echo "== mneme scripts: SKIP (no fetched copies of Mneme's scripts in $copies; python/mneme_scripts.py says what they are)"
fi
exit $status
