#!/usr/bin/env python3
"""One table from `go test -bench` output (bench/run.sh pipes it here).

Reads the output of one or more `go test -run XXX -bench ...` runs on stdin
(their `pkg:` lines name the package of the benchmarks that follow) and
prints one row per benchmark: its package, time per operation, the metrics
it reports beside (ns/added, ns/update, MB/s, ...), and, for the benchmarks
that have one, the target and whether the figure meets it. Benchmarks that
skipped (a GPU benchmark without a GPU) are listed as skipped. Exits 1 when
a benchmark failed or a figure misses its target, else 0.

Usage: go test -run XXX -bench . ./db ./jit | bench/benchtable.py
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field

# Targets of the issues, by benchmark (without its -N suffix) and metric:
# (metric, bound, "<=" or ">=", how the target is stated). bench/README.md
# gives the same targets with their sources.
TARGETS: dict[str, tuple[str, float, str, str]] = {
    "BenchmarkForwardedLaunch": ("ns/added", 1000.0, "<=", "shim adds <= 1 us a launch"),
    "BenchmarkRecordingLaunchStats": ("ns/added", 100.0, "<=", "statistics <= 100 ns a launch"),
    "BenchmarkCountedLaunchStats": ("ns/added", 100.0, "<=", "statistics <= 100 ns a launch"),
    "BenchmarkLaunchStatsUpdate": ("ns/update", 100.0, "<=", "statistics <= 100 ns a launch"),
    "BenchmarkColdCompile": ("ns/op", 25e6, "<=", "cold compile <= 25 ms"),
    "BenchmarkCacheHit": ("ns/op", 0.5e6, "<=", "cache hit <= 0.5 ms"),
    "BenchmarkDiskCacheHit": ("ns/op", 0.5e6, "<=", "cache hit <= 0.5 ms"),
    "BenchmarkGPUReplayVecAdd": ("replays/s", 500.0, ">=", ">= 500 replays/s"),
}

RESULT = re.compile(r"^(Benchmark\S+?)(?:-\d+)?\s+(\d+)\s+(.*)$")
PAIR = re.compile(r"([-+0-9.eE]+)\s+(\S+)")
SKIP = re.compile(r"^\s*--- SKIP: (Benchmark\S+)")
FAIL = re.compile(r"^\s*--- FAIL: (Benchmark\S+)")


@dataclass
class Row:
    name: str
    package: str
    metrics: dict[str, float] = field(default_factory=dict)
    status: str = "ok"  # ok, skipped, failed


def parse(lines: list[str]) -> list[Row]:
    """Rows in the order the benchmarks appear; a skip or failure line names its row."""
    rows: list[Row] = []
    package = ""
    for line in lines:
        line = line.rstrip("\n")
        if line.startswith("pkg: "):
            package = line[5:].strip()
            continue
        m = SKIP.match(line) or FAIL.match(line)
        if m:
            status = "skipped" if "SKIP" in line else "failed"
            rows.append(Row(m.group(1), package, status=status))
            continue
        m = RESULT.match(line)
        if m:
            metrics = {unit: float(value) for value, unit in PAIR.findall(m.group(3))}
            rows.append(Row(m.group(1), package, metrics))
    return rows


def base_name(name: str) -> str:
    """The top-level benchmark of a sub-benchmark (BenchmarkX/sub -> BenchmarkX)."""
    return name.split("/", 1)[0]


def human(value: float, unit: str) -> str:
    """A time per operation in ns, us, ms or s; any other metric as printed."""
    if unit != "ns/op":
        return f"{value:g} {unit}"
    for scale, name in ((1e9, "s"), (1e6, "ms"), (1e3, "us")):
        if value >= scale:
            return f"{value / scale:.3g} {name}/op"
    return f"{value:.3g} ns/op"


def verdict(row: Row) -> tuple[str, str]:
    """(target, meets) for the row: meets is yes, NO, or '' without a target or figure."""
    target = TARGETS.get(base_name(row.name))
    if target is None:
        return "", ""
    metric, bound, op, stated = target
    value = row.metrics.get(metric)
    if row.status != "ok" or value is None:
        return stated, ""
    ok = value <= bound if op == "<=" else value >= bound
    return stated, "yes" if ok else "NO"


def table(rows: list[Row]) -> list[str]:
    out = ["| benchmark | package | time | other metrics | target | meets |", "|---|---|---|---|---|---|"]
    for r in rows:
        target, meets = verdict(r)
        pkg = r.package.split("/mneme/", 1)[-1]
        if r.status != "ok":
            out.append(f"| {r.name} | {pkg} | {r.status} | | {target} | |")
            continue
        time = human(r.metrics["ns/op"], "ns/op") if "ns/op" in r.metrics else ""
        other = ", ".join(human(v, u) for u, v in r.metrics.items() if u != "ns/op")
        out.append(f"| {r.name} | {pkg} | {time} | {other} | {target} | {meets} |")
    return out


def main() -> int:
    rows = parse(sys.stdin.readlines())
    if not rows:
        print("benchtable: no benchmark results on stdin", file=sys.stderr)
        return 1
    print("\n".join(table(rows)))
    bad = [r.name for r in rows if r.status == "failed" or verdict(r)[1] == "NO"]
    if bad:
        print(f"benchtable: failed or missed the target: {', '.join(bad)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
