"""Shared fixtures: a small recording database and the stand-in worker."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

STANDIN = Path(__file__).with_name("standin_worker.py")

# The recording the tests read is written by the Go database writers
# (tune/pyfixture_test.go keeps it current): a vector add with two instances,
# grid 4096 (INSTANCE) and grid 8 (SECOND_INSTANCE), block 256.
FIXTURE = Path(__file__).with_name("testdata") / "rdb"


def _fixture_ids() -> tuple[str, str, str]:
    (kernel,) = FIXTURE.glob("*.json")
    doc = json.loads(kernel.read_text())
    by_grid = {inst["GridDims"]["x"]: dh for dh, inst in doc["instances"].items()}
    return doc["StaticHash"], by_grid[4096], by_grid[8]


STATIC_HASH, INSTANCE, SECOND_INSTANCE = _fixture_ids()


def write_recording(folder: Path) -> Path:
    """A copy of the Go-written recording in folder; returns its kernel JSON."""
    shutil.copytree(FIXTURE, folder, dirs_exist_ok=True)
    return folder / f"{STATIC_HASH}.json"


@pytest.fixture
def recording(tmp_path: Path) -> Path:
    return write_recording(tmp_path / "rdb")


@pytest.fixture
def standin_command() -> list[str]:
    return [sys.executable, str(STANDIN)]
