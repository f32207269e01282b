#!/usr/bin/env bash
# Tuning throughput on the recorded vector add: the 80-configuration space
# (5 pipelines x blockDim.x 64..1024 step 64, 7 timed launches each) in our
# spelling (`--space examples/vecadd/tune-80.yaml`, target at least 30
# configurations/s) and the same space in Mneme's spelling (a SearchSpace
# class, tune80.py beside this script, proposed by Python and run by the same
# engine; target at most 1.10x our spelling's time). Whole-command times, as a
# user waits for them. Lines starting with "== " are the results.
# Usage: bench/gpu-tune80.sh RDB OUTDIR, where RDB is a recording of
# examples/vecadd (scripts/gpu-test.sh makes one); mneme on PATH. Results go
# to OUTDIR/tune-vecadd and OUTDIR/tune-vecadd-mneme, the two commands' output
# to $LOGS (default OUTDIR).
set -uo pipefail
rdb=${1:?usage: gpu-tune80.sh RDB OUTDIR}
w=${2:?usage: gpu-tune80.sh RDB OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
logs=${LOGS:-$w}
mkdir -p "$w" "$logs"
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
trials() { wc -l < "$1/trials.jsonl" 2>/dev/null || echo 0; }

s=$(date +%s%N)
mneme tune -rdb "$rdb" --space "$root/examples/vecadd/tune-80.yaml" --sampler exhaustive --iterations 7 --output "$w/tune-vecadd" > "$logs/tune-vecadd.log" 2>&1; rc=$?
e=$(ms "$s")
tail -15 "$logs/tune-vecadd.log"
n=$(trials "$w/tune-vecadd")
echo "== tune vecadd 80 configs: rc=$rc, $n trials in ${e} ms ($(python3 -c "print(round($n/max($e,1)*1000,1))") configs/s)"

s=$(date +%s%N)
PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH} mneme tune --record-database "$rdb" --space-module "$here/tune80.py:VecAdd80" --sampler exhaustive --iterations 7 --warmup 1 --metric median --results-dir "$w/tune-vecadd-mneme" > "$logs/tune-vecadd-mneme.log" 2>&1; rc2=$?
e2=$(ms "$s")
n2=$(trials "$w/tune-vecadd-mneme")
echo "== tune vecadd 80 configs, Mneme's spelling (--space-module): rc=$rc2, $n2 trials in ${e2} ms; $(python3 -c "print(f'{$e2/max($e,1):.2f}x')") our spelling's time (want <= 1.10x)"
