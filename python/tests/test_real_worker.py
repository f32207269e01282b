"""The executor against the real `mneme worker` (no GPU needed) and binary discovery."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from mneme.async_executor import AsyncReplayExecutor, WorkerStartupError
from mneme.binary import MnemeNotFoundError, find_mneme_binary
from mneme.mneme_types import ExperimentConfiguration


def real_binary() -> str:
    try:
        return find_mneme_binary()
    except MnemeNotFoundError as e:
        pytest.skip(f"the mneme binary is not built: {e}")


def test_open_errors_of_the_real_worker_reach_the_caller(recording: Path, tmp_path: Path) -> None:
    # An instance the recording does not hold: the Go worker's open fails
    # with its own reason (whatever the machine has), and that reason reaches
    # the caller and the worker's log.
    missing = "0" * 16
    ex = AsyncReplayExecutor(recording, missing, 3, tmp_path / "results", 1, mneme_bin=real_binary())
    with ex:
        config = ExperimentConfiguration.from_dict({"grid": {"x": 1}, "block": {"x": 32}})
        with pytest.raises(WorkerStartupError, match=f"no such instance \"{missing}\""):
            ex.evaluate(config)
    assert missing in (tmp_path / "results" / "Worker-0.log").read_text()


def test_find_binary_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "bin" / "mneme"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("MNEME_BIN", str(fake))
    assert find_mneme_binary() == str(fake)
    monkeypatch.setenv("MNEME_BIN", str(tmp_path / "absent"))
    with pytest.raises(MnemeNotFoundError, match="MNEME_BIN"):
        find_mneme_binary()
    monkeypatch.delenv("MNEME_BIN")
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    assert find_mneme_binary() == str(fake)


def test_package_is_typed() -> None:
    """mypy --strict passes on the package (it ships py.typed)."""
    pytest.importorskip("mypy", reason="mypy is not installed")
    package = Path(__file__).resolve().parents[1]
    assert (package / "mneme" / "py.typed").is_file()
    proc = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "-p", "mneme"],
                          cwd=package, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
