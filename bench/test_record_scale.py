"""The verdicts record_scale.py prints for the GPU checks, and its rounds
(make test runs this)."""
import json
import os
import pathlib
import subprocess
import sys

import record_scale as rs

GIB = 1 << 30


def test_overhead_bound_judges_only_programs_in_scope() -> None:
    line = rs.verdict([("small", 1.30, 4 << 20, 0.4), ("tracer", 1.08, 4 * GIB, 1.5), ("short", 1.9, 9 * GIB, 0.36)])
    assert "met by every one: tracer 1.080" in line
    assert "outside the bound: small 1.300 (4.0 MiB on the device, 0.40 s plainly), short 1.900 (0.36 s plainly)" in line
    assert "not met" not in line


def test_overhead_bound_names_who_missed_it() -> None:
    line = rs.verdict([("tracer", 1.101, 4 * GIB, 1.5), ("long", 1.02, 4 * GIB, 6.0)])
    assert line.endswith(": not met by tracer 1.101; met by long 1.020")


def test_copy_target_is_judged_on_the_largest_snapshot() -> None:
    line = rs.copy_verdict([("tiny", 2 << 20, 0.01), ("tracer", 4 * GIB, 0.92), ("bigmem", 3 * GIB, 0.45)])
    assert ": not met by bigmem 0.45; met by tracer 0.92; too small to judge: tiny (2.0 MiB)" in line


def test_nothing_in_scope_is_said() -> None:
    assert "nothing in scope" in rs.verdict([("small", 1.0, 1, 0.1)])
    assert "nothing in scope" in rs.copy_verdict([])


def _script(path: pathlib.Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def test_warmup_rounds_run_but_are_not_counted(tmp_path: pathlib.Path) -> None:
    log = tmp_path / "calls"
    pinned = _script(tmp_path / "pinned_bw", "echo 'pinned device-to-host: 55.0 GB/s'\n")
    app = _script(tmp_path / "app", f"echo plain >> {log}\n")
    # `mneme record -rdb DIR --max-recordings N -- APP`: a database with a status.
    mneme = _script(tmp_path / "mneme", f'mkdir -p "$3"; echo \'{{"arena_peak": 0}}\' > "$3/.mneme-record.status"; echo record >> {log}\n')
    out = tmp_path / "samples.json"
    script = os.path.join(os.path.dirname(__file__), "record_scale.py")
    p = subprocess.run([sys.executable, script, "--mneme", mneme, "--pinned-bw", pinned, "--runs", "2", "--warmup", "1",
                        "--json", str(out), f"app={app}:{app}"], capture_output=True, text=True, check=False)
    assert p.returncode == 0, p.stderr
    calls = log.read_text().split()
    assert calls.count("plain") == 3 and calls.count("record") == 3
    samples = json.loads(out.read_text())["samples"]
    assert len(samples["app/plain"]) == 2 and len(samples["app/record"]) == 2
    p = subprocess.run([sys.executable, script, "--mneme", mneme, "--pinned-bw", pinned, "--warmup", "-1", f"app={app}:{app}"],
                       capture_output=True, text=True, check=False)
    assert p.returncode != 0 and "--warmup" in p.stderr
