"""mneme.convert: the Proteus file Mneme's scripts export (the entry itself is tied to Go's by tune/proteus_python_test.go)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import INSTANCE
from mneme.convert import convert_to_json, proteus_entry
from mneme.mneme_types import ExperimentConfiguration
from mneme.recorded_execution import RecordedExecution


def config(**kw: object) -> ExperimentConfiguration:
    return ExperimentConfiguration.from_dict({"grid": {"x": 4096}, "block": {"x": 256}, **kw})


def test_file_is_keyed_by_the_mangled_name(recording: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rec = RecordedExecution.from_json(recording)
    out = tmp_path / "tuned.json"
    c = config(passes="default<O2>", set_launch_bounds=True, max_threads=512)
    convert_to_json(str(out), rec, rec[INSTANCE], c)
    doc = json.loads(out.read_text())
    assert list(doc) == ["_Z6vecaddPKfS0_Pfi"]
    assert doc["_Z6vecaddPKfS0_Pfi"] == proteus_entry(c)
    said = capsys.readouterr().out
    # The recording marks n, the 4th argument, as the one scalar: Proteus's
    # annotation is 1-based.
    assert '__attribute__((annotate("jit", 4)))' in said
    assert f"export PROTEUS_TUNED_KERNELS={out.resolve()}" in said


def test_entry_reads_each_field() -> None:
    base = proteus_entry(config())
    assert base["OptLevel"] == "3" and base["TunedMaxThreads"] == -1 and base["CodeGen"] == "serial"
    assert proteus_entry(config(passes="default<Os>"))["OptLevel"] == "s"
    assert proteus_entry(config(passes="function(gvn)"))["OptLevel"] == "3"
    assert proteus_entry(config(passes="function(gvn)"))["Pipeline"] == "function(gvn)"
    assert proteus_entry(config(specialize=True))["SpecializeArgs"] is True
    dims = proteus_entry(config(specialize_dims=True))
    assert dims["SpecializeDims"] is True and dims["SpecializeDimsRange"] is True
    bounds = proteus_entry(config(set_launch_bounds=True, max_threads=512, min_blocks_per_sm=2))
    assert bounds["LaunchBounds"] is True and bounds["TunedMaxThreads"] == 512 and bounds["MinBlocksPerSM"] == 2
    assert proteus_entry(config(codegen_opt=1))["CodeGenOptLevel"] == 1


def test_wrong_config_type_is_refused(recording: Path, tmp_path: Path) -> None:
    rec = RecordedExecution.from_json(recording)
    with pytest.raises(TypeError, match="ExperimentConfiguration"):
        convert_to_json(str(tmp_path / "x.json"), rec, rec[INSTANCE], {"grid": {"x": 1}})  # type: ignore[arg-type]
    assert not (tmp_path / "x.json").exists()
