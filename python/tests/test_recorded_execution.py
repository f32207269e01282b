"""RecordedExecution on a database written by the test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mneme.recorded_execution import RecordedExecution, RecordingError
from conftest import INSTANCE, SECOND_INSTANCE, STATIC_HASH


def test_mapping_of_instances(recording: Path) -> None:
    rec = RecordedExecution.from_json(recording)
    assert len(rec) == 2 and set(rec) == {INSTANCE, SECOND_INSTANCE}
    k = rec[INSTANCE]
    assert isinstance(k, RecordedExecution.KernelInstance)
    assert (k.grid_dim.x, k.grid_dim.y, k.grid_dim.z) == (4096, 1, 1)
    assert (k.block_dim.x, k.block_dim.y, k.block_dim.z) == (256, 1, 1)
    assert k.shared_mem == 0 and k.occ == 3
    assert k.args[3] == "00100000"  # n = 0x1000, little-endian as recorded
    assert k.specializations == [False, False, False, True]
    assert k.available_specializations == [3]
    assert k.kernel_name == "_Z6vecaddPKfS0_Pfi" and k.static_hash == STATIC_HASH
    assert k.demangled_name.startswith("vecadd(")
    assert rec.arg_names == ["a", "b", "c", "n"]
    assert rec[SECOND_INSTANCE].grid_dim.x == 8


def test_files_resolve_against_the_json_folder(recording: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # a relative path must not depend on the working directory
    rec = RecordedExecution.from_json(Path("rdb") / recording.name)
    k = rec[INSTANCE]
    assert k.prologue == recording.parent / f"DeviceState.prologue.{STATIC_HASH}.{INSTANCE}.mneme"
    assert k.prologue.is_absolute() and k.epilogue.is_file()
    assert k.modules == [recording.parent / f"RecordedIR_{STATIC_HASH}.bc"]


def test_missing_file_raises_naming_it(recording: Path) -> None:
    (recording.parent / f"DeviceState.epilogue.{STATIC_HASH}.{SECOND_INSTANCE}.mneme").unlink()
    with pytest.raises(RecordingError, match=f"instances\\[{SECOND_INSTANCE}\\].Epilogue: file .* does not exist"):
        RecordedExecution.from_json(recording)
    with pytest.raises(RecordingError, match="not found"):
        RecordedExecution.from_json(recording.parent / "nothing.json")


def test_malformed_fields_are_named(recording: Path) -> None:
    doc = json.loads(recording.read_text())
    doc["instances"][INSTANCE]["GridDims"] = {"x": "big"}
    recording.write_text(json.dumps(doc))
    with pytest.raises(RecordingError, match="GridDims.x"):
        RecordedExecution.from_json(recording)
    del doc["KernelName"]
    recording.write_text(json.dumps(doc))
    with pytest.raises(RecordingError, match="missing KernelName"):
        RecordedExecution.from_json(recording)


def test_unknown_instance_lists_the_recorded_ones(recording: Path) -> None:
    rec = RecordedExecution.from_json(recording)
    with pytest.raises(KeyError, match=INSTANCE):
        rec["ffff"]
