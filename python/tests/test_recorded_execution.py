"""RecordedExecution on the recording the Go writers wrote (testdata/rdb)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from mneme import recorded_execution
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


# Hostile recordings: every one is a RecordingError naming the file and the
# field, never a hang, a raw OverflowError/RecursionError/UnicodeDecodeError
# or a file outside the folder.


def _edit(recording: Path, change: Any) -> None:
    doc = json.loads(recording.read_text())
    change(doc)
    recording.write_text(json.dumps(doc))


def _instance(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["instances"][INSTANCE]  # type: ignore[no-any-return]


@pytest.mark.parametrize("change, message", [
    (lambda d: _instance(d).update(Prologue="/etc/passwd"), r"Prologue: '/etc/passwd': want a file name inside the database folder"),
    (lambda d: _instance(d).update(Epilogue="../outside.mneme"), r"Epilogue: '../outside.mneme': want a file name"),
    (lambda d: d.update(Modules=["../../etc/passwd"]), r"Modules\[0\]: '../../etc/passwd': want a file name"),
    (lambda d: _instance(d).update(Prologue=7), r"Prologue: want str"),
    (lambda d: _instance(d).update(SharedMem=1e400), r"SharedMem: want an integer"),
    (lambda d: _instance(d).update(Occurrences=10**30), r"Occurrences: want an integer in 1\.\."),
    (lambda d: _instance(d).update(GridDims={"x": 10**30}), r"GridDims.x: want an integer in 1\.\."),
    (lambda d: _instance(d).update(Args=[[1]]), r"Args: want hex strings"),
    (lambda d: d.update(Specializations="yes"), r"Specializations: want a list of true/false"),
])
def test_hostile_fields_are_named(recording: Path, change: Any, message: str) -> None:
    _edit(recording, change)
    with pytest.raises(RecordingError, match=message):
        RecordedExecution.from_json(recording)


def test_link_out_of_the_folder_is_refused(recording: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.mneme"
    outside.write_bytes(b"secret")
    name = f"DeviceState.prologue.{STATIC_HASH}.{INSTANCE}.mneme"
    (recording.parent / name).unlink()
    (recording.parent / name).symlink_to(outside)
    with pytest.raises(RecordingError, match="Prologue: .* is a link that leads out of the database folder"):
        RecordedExecution.from_json(recording)


@pytest.mark.parametrize("content, message", [
    (b"[" * 200000 + b"]" * 200000, "not valid JSON"),
    (b'{"StaticHash": "\xff\xfe"}', "not UTF-8 text at byte"),
    (b'{"StaticHash": "a", "StaticHash": "b"}', "key 'StaticHash' appears twice"),
    (b'{"StaticHash": 1e999999}', "StaticHash: want str"),
])
def test_hostile_text_is_named(recording: Path, content: bytes, message: str) -> None:
    recording.write_bytes(content)
    with pytest.raises(RecordingError, match=message) as e:
        RecordedExecution.from_json(recording)
    assert recording.name in str(e.value)


def test_fifo_is_refused_without_waiting(tmp_path: Path) -> None:
    fifo = tmp_path / "k.json"
    os.mkfifo(fifo)
    with pytest.raises(RecordingError, match="not a regular file"):
        RecordedExecution.from_json(fifo)


def test_size_is_checked_before_reading(recording: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recorded_execution, "MAX_KERNEL_FILE", 100)
    with pytest.raises(RecordingError, match="more than the 100 a kernel file may have"):
        RecordedExecution.from_json(recording)
