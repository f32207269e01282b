"""Shared fixtures: a small recording database and the stand-in worker."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

STANDIN = Path(__file__).with_name("standin_worker.py")

STATIC_HASH = "1f2e3d4c5b6a7988"
INSTANCE = "a1b2c3d4e5f60718"
SECOND_INSTANCE = "0badc0ffee000001"


def write_recording(folder: Path) -> Path:
    """A kernel JSON with Mneme's keys plus the files it names (contents are placeholders)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"RecordedIR_{STATIC_HASH}.bc").write_bytes(b"BC\xc0\xde")
    instances: dict[str, Any] = {}
    for dh, grid, n_hex in ((INSTANCE, 4096, "00001000"), (SECOND_INSTANCE, 8, "00000800")):
        for kind in ("prologue", "epilogue"):
            (folder / f"DeviceState.{kind}.{STATIC_HASH}.{dh}.mneme").write_bytes(b"MNEMESNP")
        instances[dh] = {
            "DynamicHash": dh,
            "Prologue": f"DeviceState.prologue.{STATIC_HASH}.{dh}.mneme",
            "Epilogue": f"DeviceState.epilogue.{STATIC_HASH}.{dh}.mneme",
            "BlockDims": {"x": 256, "y": 1, "z": 1},
            "GridDims": {"x": grid, "y": 1, "z": 1},
            "SharedMem": 0,
            "Args": ["0000531540000000", "0000531540400000", "0000531540800000", n_hex],
            "Occurrences": 3,
        }
    doc = {
        "StaticHash": STATIC_HASH,
        "VAddr": "0x531540000000",
        "VASize": 4294967296,
        "KernelName": "_Z6vecaddPKfS0_Pfi",
        "DemangledName": "vecadd(float const*, float const*, float*, int)",
        "Modules": [f"RecordedIR_{STATIC_HASH}.bc"],
        "ArgNames": ["a", "b", "c", "n"],
        "Specializations": [False, False, False, True],
        "ArgSizes": [8, 8, 8, 4],
        "ArgKinds": ["ptr", "ptr", "ptr", "i32"],
        "FormatVersion": 1,
        "instances": instances,
    }
    path = folder / f"{STATIC_HASH}.json"
    path.write_text(json.dumps(doc, indent=1))
    return path


@pytest.fixture
def recording(tmp_path: Path) -> Path:
    return write_recording(tmp_path / "rdb")


@pytest.fixture
def standin_command() -> list[str]:
    return [sys.executable, str(STANDIN)]
