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
and prints, per variant, the mean, median and fastest wall time with their
ratios to plain (the mean's with a 95% bootstrap interval), and the median
time of the application's own launch loop (which the examples print on
stderr as "wall time: X ms").

With --trace, --trace-runs extra runs of each variant write a timeline
(MNEME_TRACE) of where the time goes, printed as medians in ms from the spawn.

Usage: record_overhead.py --plain APP --wrapped APP [--mneme [LABEL=]PATH ...]
       [--launches 2000] [--runs 15] [--max-recordings 2] [--json FILE]
       [--trace [--trace-runs 9]]
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
    """Runs cmd once: its wall time, launch-loop time, stderr and resource use
    (CPU seconds and involuntary context switches of it and the processes
    it waited for, such as the application under `mneme record`)."""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - start
        p.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        stderr = err.read()
    if p.returncode != 0:
        sys.exit(f"record_overhead: {' '.join(cmd)} exited {p.returncode}:\n{stderr.decode(errors='replace')[-2000:]}")
    m = LOOP.search(stderr)
    usage = {"user_s": ru.ru_utime, "sys_s": ru.ru_stime, "invol_switches": ru.ru_nivcsw}
    return wall, (float(m.group(1)) if m else None), stderr.decode(errors="replace"), usage


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plain", required=True)
    ap.add_argument("--wrapped", required=True)
    ap.add_argument("--mneme", action="append", default=[], help="[LABEL=]PATH of a mneme binary (repeatable; default: mneme on PATH)")
    ap.add_argument("--runtime-lib", help="libmneme_rt.so for the in-app variant (default: next to the first mneme)")
    ap.add_argument("--launches", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--max-recordings", type=int, default=2, help="as `mneme record --max-recordings` (default 2, as the target is stated)")
    ap.add_argument("--json", help="write every sample here")
    ap.add_argument("--in-app", action="append", default=[], metavar="LABEL:VAR=VALUE[:VAR=VALUE...]",
                    help="another in-app variant with these variables changed (repeatable), to isolate a cost")
    ap.add_argument("--nvcc", help="the example built by nvcc alone (static cudart): recorded through the driver, "
                    "without the wrapper, and judged against its own plain runs")
    ap.add_argument("--trace", action="store_true", help="print a timeline of traced runs of every variant first")
    ap.add_argument("--trace-runs", type=int, default=9)
    a = ap.parse_args()

    mnemes = []
    for spec in a.mneme or ["mneme"]:
        label, _, path = spec.rpartition("=")
        path = shutil.which(path) or path
        mnemes.append((label or "record", os.path.abspath(path)))
    lib = a.runtime_lib or os.path.join(os.path.dirname(os.path.dirname(mnemes[0][1])), "lib", "libmneme_rt.so")
    for path in [a.plain, a.wrapped, lib] + [p for _, p in mnemes] + ([a.nvcc] if a.nvcc else []):
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
    envs = [os.environ, inapp_env]  # what --trace sets MNEME_TRACE in
    for spec in a.in_app:
        label, *pairs = spec.split(":")
        env = dict(inapp_env, **dict(p.split("=", 1) for p in pairs))
        envs.append(env)
        variants.append((label, lambda env=env: run([a.wrapped, n], env)))
    for label, path in mnemes:
        variants.append((label, lambda path=path: run([path, "record", "-rdb", rdb, "--max-recordings", str(a.max_recordings), "--", a.wrapped, n])))

    # The recorded variant of each plain one: (recorded, plain) labels.
    judged = [(label, "plain") for label, _ in mnemes]
    if a.nvcc:
        variants.append(("nvcc-plain", lambda: run([a.nvcc, n])))
        variants.append(("nvcc-record", lambda: run([mnemes[0][1], "record", "-rdb", rdb, "--max-recordings", str(a.max_recordings), "--", a.nvcc, n])))
        judged.append(("nvcc-record", "nvcc-plain"))

    if a.trace:
        # Each traced variant runs --trace-runs times; every event's median
        # time from the spawn is shown (events named by a hash are numbered
        # in order instead, so runs line up).
        trace = os.path.join(work, "trace")
        for env in envs:
            env["MNEME_TRACE"] = trace
        for name, fn in variants:
            times = {}
            for _ in range(a.trace_runs):
                shutil.rmtree(rdb, ignore_errors=True)
                if os.path.exists(trace):
                    os.remove(trace)
                spawn = time.time_ns()
                fn()
                done = time.time_ns()
                seen = {}
                events = []
                if os.path.exists(trace):
                    with open(trace) as f:
                        for line in f:
                            ns, _, source, event = line.rstrip("\n").split(" ", 3)
                            event = re.sub(r"\b[0-9a-f]{16}\b", "#", event)
                            key = f"{source} {event}"
                            seen[key] = seen.get(key, 0) + 1
                            if "#" in key:
                                key = key.replace("#", str(seen[key]))
                            events.append((key, int(ns) - spawn))
                events.append(("exited", done - spawn))
                events.sort(key=lambda e: e[1])
                prev = 0
                for key, t in events:
                    at, steps = times.setdefault(key, ([], []))
                    at.append(t / 1e6)
                    steps.append((t - prev) / 1e6)
                    prev = t
            print(f"timeline of {name} over {a.trace_runs} runs: median ms from the spawn, and median ms since the event before")
            for key, (ts, steps) in sorted(times.items(), key=lambda kv: statistics.median(kv[1][0])):
                print(f"  {statistics.median(ts):8.1f} {statistics.median(steps):8.1f}  {key}")
        for env in envs:
            env.pop("MNEME_TRACE", None)

    samples = {name: [] for name, _ in variants}
    last_stderr = {}
    for _ in range(a.runs):
        for name, fn in variants:
            shutil.rmtree(rdb, ignore_errors=True)
            wall, loop, err, usage = fn()
            samples[name].append(dict(usage, wall_s=wall, loop_ms=loop))
            last_stderr[name] = err
    shutil.rmtree(work, ignore_errors=True)

    def med(name, key):
        vals = [s[key] for s in samples[name] if s[key] is not None]
        return statistics.median(vals) if vals else float("nan")

    def ratio_ci(name, stat, base="plain"):
        """The ratio of stat (mean or median) to base's, with a 95% bootstrap interval."""
        x = [s["wall_s"] for s in samples[name]]
        p = [s["wall_s"] for s in samples[base]]
        rng = random.Random(1)
        rs = sorted(stat(rng.choices(x, k=len(x))) / stat(rng.choices(p, k=len(p))) for _ in range(2000))
        return stat(x) / stat(p), rs[50], rs[1949]

    # The GPU machine's process start and exit (driver initialization and
    # teardown) vary by tens of ms and not symmetrically, so the mean, with
    # its interval, is the steadier measure; the median and the fastest run
    # are shown too.
    print(f"{os.path.basename(a.wrapped)} {a.launches} launches, --max-recordings {a.max_recordings}, {a.runs} interleaved runs")
    print(f"{'variant':<20} {'mean ms':>8} {'ratio (95% interval)':>22} {'median ms':>10} {'ratio':>6} {'fastest ms':>11} {'ratio':>6} {'launch loop ms':>15}")
    fastest_plain = min(s["wall_s"] for s in samples["plain"])
    for name, _ in variants:
        walls = [s["wall_s"] for s in samples[name]]
        r, lo, hi = ratio_ci(name, statistics.mean)
        print(f"{name:<20} {statistics.mean(walls)*1e3:8.1f} {r:8.3f} ({lo:.3f}-{hi:.3f}) {med(name, 'wall_s')*1e3:10.1f} {med(name, 'wall_s')/med('plain', 'wall_s'):6.3f} {min(walls)*1e3:11.1f} {min(walls)/fastest_plain:6.3f} {med(name, 'loop_ms'):15.2f}")
    # CPU time shows whether a variant competes with the application for the
    # CPU; involuntary switches whether the scheduler (or a CPU quota) took
    # it off the CPU.
    print(f"{'variant':<20} {'user ms':>8} {'sys ms':>8} {'involuntary switches':>21}  (medians)")
    for name, _ in variants:
        print(f"{name:<20} {med(name, 'user_s')*1e3:8.1f} {med(name, 'sys_s')*1e3:8.1f} {med(name, 'invol_switches'):21.0f}")
    for label, base in judged:
        for line in last_stderr[label].splitlines():
            if line.startswith("mneme record:"):
                print(f"  [{label}] {line}")
        r, lo, hi = ratio_ci(label, statistics.mean, base)
        verdict = "met" if hi <= TARGET else "met by the mean" if r <= TARGET else "NOT met"
        print(f"recording overhead ({label}): {r:.3f}x the {base} run's mean time, 95% interval {lo:.3f}-{hi:.3f} (target <= {TARGET:.2f}x: {verdict})")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"launches": a.launches, "runs": a.runs, "max_recordings": a.max_recordings, "samples": samples}, f, indent=1)


if __name__ == "__main__":
    main()
