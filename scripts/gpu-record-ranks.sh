#!/usr/bin/env bash
# Recording an MPI job's ranks on the GPU (scripts/gpu-test.sh calls it): four
# processes with OMPI_COMM_WORLD_RANK set record examples/vecadd into one
# folder, with --record-ranks all (a folder rank-N each) and with the default
# (rank 0 alone), and every instance recorded is replayed. Lines starting
# with "== MPI" are the results: each mode's exit codes, instances per rank
# and instances replayed verified.
# Usage: scripts/gpu-record-ranks.sh WORKDIR (holding wrapper/vecadd/vecadd); mneme
# on PATH. Logs go to $LOGS (default WORKDIR/record-ranks-logs).
set -uo pipefail
w=${1:?usage: gpu-record-ranks.sh WORKDIR}
logs=${LOGS:-$w/record-ranks-logs}; mkdir -p "$logs"
[ -x "$w/wrapper/vecadd/vecadd" ] || { echo "== MPI ranks: FAIL (no wrapped vecadd at $w/wrapper/vecadd/vecadd)"; exit 1; }

for mode in all default; do
  rdb=$logs/mpi-$mode; rm -rf "$rdb"
  flags=(); [ $mode = all ] && flags=(--record-ranks all)
  pids=()
  for r in 0 1 2 3; do
    OMPI_COMM_WORLD_RANK=$r OMPI_COMM_WORLD_SIZE=4 mneme record -rdb "$rdb" "${flags[@]}" -- "$w/wrapper/vecadd/vecadd" > "$logs/mpi-$mode-$r.log" 2>&1 &
    pids+=($!)
  done
  rcs=""; for p in "${pids[@]}"; do wait "$p"; rcs="$rcs $?"; done
  summary=$(python3 - "$rdb" <<'PY'
import glob, json, os, sys
rdb = sys.argv[1]
ranks = {}
for f in glob.glob(os.path.join(rdb, "**", "*.json"), recursive=True):
    k = json.load(open(f))
    ranks.setdefault(str(k.get("Rank")), 0)
    ranks[str(k.get("Rank"))] += len(k["instances"])
print(" ".join(f"rank {r}: {n} instance(s)" for r, n in sorted(ranks.items())))
PY
)
  n=0; okn=0
  for d in $(find "$rdb" -name '*.json' -exec dirname {} \; | sort -u); do
    for id in $(mneme inspect --json "$d" | python3 -c 'import json,sys; [print(i["id"]) for k in json.load(sys.stdin)["kernels"] for i in k["instances"]]'); do
      n=$((n+1)); mneme replay -rdb "$d" -rid "$id" --iterations 3 > /dev/null 2>&1 && okn=$((okn+1))
    done
  done
  echo "== MPI $mode ranks: exit codes$rcs; $summary; $okn/$n replayed verified"
done
