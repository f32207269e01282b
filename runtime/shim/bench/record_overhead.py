#!/usr/bin/env python3
"""Recording-overhead benchmark: how much longer an application takes under
`mneme record --max-recordings N` than plainly.

It runs, interleaved round by round so drift of the machine affects every
variant alike:
  plain      the application built with clang-22 alone;
  wrapped    the same source built with `mneme config cxx`, not recording
             (the shim only forwards);
  in-app     the wrapped build with the recording variables set directly:
             the runtime library records, no `mneme record` process runs;
  record     `mneme record` around the wrapped build (once per --mneme).
and prints, per variant, the median and fastest wall time, the ratio of the
medians to plain, and the median time of the application's own launch loop
(which the examples print on stderr as "wall time: X ms").

With --trace, one more run of each recording variant writes a timeline
(MNEME_TRACE) of where the time goes, printed in ms from the spawn.

Usage: record_overhead.py --plain APP --wrapped APP [--mneme [LABEL=]PATH ...]
       [--launches 2000] [--runs 15] [--max-recordings 4] [--json FILE] [--trace]
"""
import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

LOOP = re.compile(rb"wall time: ([0-9.]+) ms")
TARGET = 1.10


def run(cmd, env=None):
    start = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    wall = time.perf_counter() - start
    if p.returncode != 0:
        sys.exit(f"record_overhead: {' '.join(cmd)} exited {p.returncode}:\n{p.stderr.decode(errors='replace')[-2000:]}")
    m = LOOP.search(p.stderr)
    return wall, (float(m.group(1)) if m else None), p.stderr.decode(errors="replace")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plain", required=True)
    ap.add_argument("--wrapped", required=True)
    ap.add_argument("--mneme", action="append", default=[], help="[LABEL=]PATH of a mneme binary (repeatable; default: mneme on PATH)")
    ap.add_argument("--runtime-lib", help="libmneme_rt.so for the in-app variant (default: next to the first mneme)")
    ap.add_argument("--launches", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--max-recordings", type=int, default=4)
    ap.add_argument("--json", help="write every sample here")
    ap.add_argument("--trace", action="store_true", help="print a timeline of one traced run per recording variant")
    a = ap.parse_args()

    mnemes = []
    for spec in a.mneme or ["mneme"]:
        label, _, path = spec.rpartition("=")
        path = shutil.which(path) or path
        mnemes.append((label or "record", os.path.abspath(path)))
    lib = a.runtime_lib or os.path.join(os.path.dirname(os.path.dirname(mnemes[0][1])), "lib", "libmneme_rt.so")
    for path in [a.plain, a.wrapped, lib] + [p for _, p in mnemes]:
        if not os.path.exists(path):
            sys.exit(f"record_overhead: {path} does not exist")

    work = tempfile.mkdtemp(prefix="mneme-overhead-")
    rdb = os.path.join(work, "rdb")
    n = str(a.launches)
    inapp_env = dict(os.environ, MNEME_RECORD="1", MNEME_RDB=rdb, MNEME_RT_LIB=lib,
                     MNEME_MAX_RECORDINGS=str(a.max_recordings))
    variants = [("plain", lambda: run([a.plain, n])),
                ("wrapped", lambda: run([a.wrapped, n])),
                ("in-app", lambda: run([a.wrapped, n], inapp_env))]
    for label, path in mnemes:
        variants.append((label, lambda path=path: run([path, "record", "-rdb", rdb, "--max-recordings", str(a.max_recordings), "--", a.wrapped, n])))

    if a.trace:
        trace = os.path.join(work, "trace")
        os.environ["MNEME_TRACE"] = trace
        inapp_env["MNEME_TRACE"] = trace
        for name, fn in variants:
            for _ in range(2):  # the second run, with warm caches, is shown
                shutil.rmtree(rdb, ignore_errors=True)
                if os.path.exists(trace):
                    os.remove(trace)
                spawn = time.time_ns()
                fn()
                done = time.time_ns()
            print(f"timeline of {name} (ms from spawn):")
            if os.path.exists(trace):
                with open(trace) as f:
                    for line in f:
                        ns, pid, source, event = line.rstrip("\n").split(" ", 3)
                        print(f"  {(int(ns) - spawn) / 1e6:8.1f}  {source:<8} {event}")
            print(f"  {(done - spawn) / 1e6:8.1f}  exited")
        del os.environ["MNEME_TRACE"]
        del inapp_env["MNEME_TRACE"]

    samples = {name: [] for name, _ in variants}
    last_stderr = {}
    for _ in range(a.runs):
        for name, fn in variants:
            shutil.rmtree(rdb, ignore_errors=True)
            wall, loop, err = fn()
            samples[name].append({"wall_s": wall, "loop_ms": loop})
            last_stderr[name] = err
    shutil.rmtree(work, ignore_errors=True)

    def med(name, key):
        vals = [s[key] for s in samples[name] if s[key] is not None]
        return statistics.median(vals) if vals else float("nan")

    def ratio_ci(name):
        """The ratio of medians to plain with a 95% bootstrap interval."""
        x = [s["wall_s"] for s in samples[name]]
        p = [s["wall_s"] for s in samples["plain"]]
        rng = random.Random(1)
        rs = sorted(statistics.median(rng.choices(x, k=len(x))) / statistics.median(rng.choices(p, k=len(p))) for _ in range(2000))
        return rs[50], rs[1949]

    base = med("plain", "wall_s")
    print(f"{os.path.basename(a.wrapped)} {a.launches} launches, --max-recordings {a.max_recordings}, {a.runs} interleaved runs")
    print(f"{'variant':<20} {'median ms':>10} {'fastest ms':>11} {'ratio':>7} {'95% interval':>14} {'launch loop ms':>15}")
    for name, _ in variants:
        walls = [s["wall_s"] for s in samples[name]]
        lo, hi = ratio_ci(name)
        print(f"{name:<20} {med(name, 'wall_s')*1e3:10.1f} {min(walls)*1e3:11.1f} {med(name, 'wall_s')/base:7.3f} {lo:6.3f}-{hi:.3f} {med(name, 'loop_ms'):15.2f}")
    for label, _ in mnemes:
        for line in last_stderr[label].splitlines():
            if line.startswith("mneme record:"):
                print(f"  [{label}] {line}")
        r = med(label, "wall_s") / base
        lo, hi = ratio_ci(label)
        print(f"recording overhead ({label}): {r:.3f}x the plain run, 95% interval {lo:.3f}-{hi:.3f} (target <= {TARGET:.2f}x: {'met' if hi <= TARGET else 'met by the median' if r <= TARGET else 'NOT met'})")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"launches": a.launches, "runs": a.runs, "max_recordings": a.max_recordings, "samples": samples}, f, indent=1)


if __name__ == "__main__":
    main()
