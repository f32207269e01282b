"""The example tuning scripts end to end, with the stand-in worker as `mneme`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import INSTANCE, STANDIN

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture
def fake_mneme(tmp_path: Path) -> dict[str, str]:
    script = tmp_path / "mneme"
    script.write_text(f"#!/bin/sh\nexec {sys.executable} {STANDIN}\n")
    script.chmod(0o755)
    return {**os.environ, "MNEME_BIN": str(script)}


def run(args: list[str], env: dict[str, str], cwd: Path) -> str:
    proc = subprocess.run([sys.executable, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_exhaustive_example(recording: Path, fake_mneme: dict[str, str], tmp_path: Path) -> None:
    out = run([str(EXAMPLES / "tune_vecadd.py"), "--record-db", str(recording), "--record-id", INSTANCE], fake_mneme, tmp_path)
    lines = [line for line in out.splitlines() if line.startswith("[")]
    assert len(lines) == 80
    assert lines[0].startswith("[0] block 64 default<O1>: mean 64 ns")
    assert lines[79].startswith("[79] block 1024 default<Oz>")
    # The stand-in's time is block.x, so the smallest block wins.
    assert re.search(r"BEST: block 64 default<O1> mean 64 ns speedup 4.000", out)
    assert re.search(r"80 configurations in [0-9.]+ s: [0-9.]+ configurations/s \(1 worker", out)
    assert (tmp_path / "mneme-results" / "Worker-0.log").is_file()


def test_optuna_example_two_workers(recording: Path, fake_mneme: dict[str, str], tmp_path: Path) -> None:
    out = run([str(EXAMPLES / "tune_vecadd_optuna.py"), "--record-db", str(recording), "--trials", "30",
               "--workers", "2", "--gpus", "0,1", "--storage", f"sqlite:///{tmp_path / 'study.db'}"],
              fake_mneme, tmp_path)
    assert re.search(r"30 trials \(\d+ replayed.*\(2 worker", out), out
    assert "BEST: {'block_dim_x':" in out
    assert {p.name for p in (tmp_path / "mneme-results").iterdir()} == {"Worker-0.log", "Worker-1.log"}
