#!/usr/bin/env bash
# The recording-overhead benchmark: examples/scalarsweep (2000 launches)
# plainly and under `mneme record --max-recordings 2`, in OVERHEAD_RUNS
# interleaved rounds (default 31) by record_overhead.py beside this script,
# which prints means with bootstrap intervals, medians and where a traced
# recording's time went; target at most 1.10x. Then, when the prefix holds
# record.test (scripts/gpu-bundle.sh puts it there), the snapshot write
# throughput of the record package's benchmark.
# Usage: bench/gpu-record-overhead.sh [WORKDIR], where WORKDIR/plain and
# WORKDIR/wrapper hold the example builds (scripts/gpu-test.sh makes them);
# without them scalarsweep is built into $WORK (default /tmp/mneme-record-overhead).
# Needs an NVIDIA GPU, CUDA 13 at $CUDA_PATH and a mneme prefix (MNEME_PREFIX_DIR,
# default .gpu/rt) with bin/mneme-cxx. Logs go to $LOGS (default
# /tmp/gpu-record-overhead). The result line starts with "recording overhead".
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
cd "$root"
out=${LOGS:-/tmp/gpu-record-overhead}
rm -rf "$out" && mkdir -p "$out"
source scripts/gpu-prefix.sh
now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

builds=${1:-}
if [ -z "$builds" ] || [ ! -x "$builds/plain/scalarsweep/scalarsweep" ] || [ ! -x "$builds/wrapper/scalarsweep/scalarsweep" ]; then
  builds=${WORK:-/tmp/mneme-record-overhead}
  rm -rf "$builds" && mkdir -p "$builds"
  EXAMPLES=scalarsweep examples/build-all.sh plain "$builds/plain" >"$out/build-plain.log" 2>&1 &&
    EXAMPLES=scalarsweep MNEME=$prefix/bin/mneme examples/build-all.sh wrapper "$builds/wrapper" >"$out/build-wrapper.log" 2>&1 ||
    { echo "recording overhead: not measured (scalarsweep does not build: $out/build-*.log)"; exit 1; }
fi

# What else the machine is doing, and whether its CPU quota throttles it:
# the 2000-launch figure has read ~20 ms higher after the other GPU steps
# than on a fresh machine.
machine_state() {
  echo "machine ($1): $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); cpu.max $(cat /sys/fs/cgroup/cpu.max 2>/dev/null || echo n/a);" \
    "$(grep -E '^(nr_throttled|throttled_usec)' /sys/fs/cgroup/cpu.stat 2>/dev/null | tr '\n' ' ')$(grep -E '^(Dirty|Writeback):' /proc/meminfo | tr -s ' ' | tr '\n' ' ')"
  # %CPU over each process's life: long-lived busy processes show.
  ps -eo pcpu=,comm= --sort=-pcpu | awk '$2 != "ps" && $1 > 1 && n++ < 3 {printf "  busy: %s %s%%\n", $2, $1}'
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sed 's/^/GPU: /'
machine_state before
for i in 1 2 3 4 5 6 7 8 9; do
  t0=$(now); mneme record --help >/dev/null 2>&1; t1=$(now); awk "BEGIN{print $t1-$t0}"
done | median >"$out/t-cli"
echo "mneme CLI start (record --help), median of 9: $(cat "$out/t-cli")s"
# A mneme linked against the shared libLLVM (as the GPU test bundle carries
# it) starts ~8 ms later than the statically linked one `make` ships.
# The target is stated for `mneme record --max-recordings 2`; each further
# recorded launch of this example costs ~3 ms (OVERHEAD_MAX_RECORDINGS).
label=record; ldd "$prefix/bin/mneme" 2>/dev/null | grep -q libLLVM && label=record-shared-llvm
status=0
# The same example built by nvcc alone (static cudart, nvcc's default) is
# recorded through the driver (libmneme_inject.so): issue 15's bound holds
# for it too.
nvccflag=()
if command -v nvcc >/dev/null 2>&1 || [ -x "$CUDA_PATH/bin/nvcc" ]; then
  nvcc=$(command -v nvcc || echo "$CUDA_PATH/bin/nvcc")
  arch=sm_$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d .)
  if "$nvcc" -O3 -arch="$arch" -cudart static -Iexamples/common -o "$out/scalarsweep-nvcc" examples/scalarsweep/scalarsweep.cu >"$out/build-nvcc.log" 2>&1; then
    nvccflag=(--nvcc "$out/scalarsweep-nvcc")
  else
    echo "recording overhead (nvcc): not measured (the nvcc build fails: $out/build-nvcc.log)"
  fi
fi
python3 "$here/record_overhead.py" --plain "$builds/plain/scalarsweep/scalarsweep" --wrapped "$builds/wrapper/scalarsweep/scalarsweep" \
  "${nvccflag[@]}" --mneme "$label=$prefix/bin/mneme" --runs "${OVERHEAD_RUNS:-31}" --max-recordings "${OVERHEAD_MAX_RECORDINGS:-2}" --trace --json "$out/overhead.json" >"$out/overhead.txt" 2>&1 ||
  { echo "FAIL: overhead benchmark ($out/overhead.txt)"; tail -n 5 "$out/overhead.txt"; status=1; }
sed -n '/interleaved runs/,$p' "$out/overhead.txt"
machine_state after
if [ -x "$prefix/bin/record.test" ]; then
  echo "snapshot write throughput (record package benchmark, 64 MiB of allocations per instance)"
  (cd "$out" && "$prefix/bin/record.test" -test.run XXX -test.bench RecordInstance -test.benchtime 4x 2>&1 | grep -E '^Benchmark')
fi
exit $status
