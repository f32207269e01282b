"""Each file a kernel JSON names, missing alone, is an error naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import INSTANCE, SECOND_INSTANCE, STATIC_HASH
from mneme.recorded_execution import RecordedExecution, RecordingError


@pytest.mark.parametrize("name,field", [
    (f"DeviceState.prologue.{STATIC_HASH}.{INSTANCE}.mneme", f"instances[{INSTANCE}].Prologue"),
    (f"DeviceState.epilogue.{STATIC_HASH}.{INSTANCE}.mneme", f"instances[{INSTANCE}].Epilogue"),
    (f"DeviceState.prologue.{STATIC_HASH}.{SECOND_INSTANCE}.mneme", f"instances[{SECOND_INSTANCE}].Prologue"),
    (f"DeviceState.epilogue.{STATIC_HASH}.{SECOND_INSTANCE}.mneme", f"instances[{SECOND_INSTANCE}].Epilogue"),
    (f"RecordedIR_{STATIC_HASH}.bc", "Modules"),
])
def test_each_missing_file_alone(recording: Path, name: str, field: str) -> None:
    RecordedExecution.from_json(recording)  # whole, it loads
    (recording.parent / name).unlink()
    with pytest.raises(RecordingError) as info:
        RecordedExecution.from_json(recording)
    assert field in str(info.value) and name in str(info.value)
