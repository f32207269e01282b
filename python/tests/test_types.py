"""ExperimentConfiguration, dim3 and ExperimentResult against hand-computed values."""

from __future__ import annotations

import pytest

from mneme.mneme_types import ExperimentConfiguration, ExperimentResult, dim3

BASE = {"grid": {"x": 4096, "y": 1, "z": 1}, "block": {"x": 256, "y": 1, "z": 1}}
# sha256 of the JSON text below, computed with `printf ... | sha256sum`:
# {"block":{"x":256,"y":1,"z":1},"codegen_opt":3,"grid":{"x":4096,"y":1,"z":1},"internalize":true,
#  "max_threads":1024,"min_blocks_per_sm":1,"passes":"default<O3>","prune":true,"set_launch_bounds":false,
#  "shared_mem":0,"specialize":false,"specialize_dims":false}
BASE_HASH = "6e057d967dfd30b3fea7bc71aa989a9bc39c8a6c6f9c5c327674efc93bbc5333"
# The same with "max_registers":64 between "internalize" and "max_threads".
MAXREG_HASH = "a757bde53a8f331be08ef2720173fc5a394cb32c259bf80191dfcfb9666ca20c"


def test_defaults_and_to_dict_are_mnemes() -> None:
    c = ExperimentConfiguration.from_dict(BASE)
    assert c.to_dict() == {
        "grid": {"x": 4096, "y": 1, "z": 1},
        "block": {"x": 256, "y": 1, "z": 1},
        "shared_mem": 0,
        "specialize": False,
        "set_launch_bounds": False,
        "max_threads": 1024,
        "min_blocks_per_sm": 1,
        "specialize_dims": False,
        "passes": "default<O3>",
        "codegen_opt": 3,
        "prune": True,
        "internalize": True,
    }
    assert list(c.to_dict())[:3] == ["grid", "block", "shared_mem"]


def test_hash_is_sha256_of_sorted_compact_json() -> None:
    assert ExperimentConfiguration.from_dict(BASE).hash() == BASE_HASH
    assert ExperimentConfiguration.from_dict({**BASE, "max_registers": 64}).hash() == MAXREG_HASH
    assert ExperimentConfiguration(grid=dim3(4096), block=dim3(256)).hash() == BASE_HASH


def test_from_dict_accepts_dim3_and_ignores_codegen_method() -> None:
    c = ExperimentConfiguration.from_dict({"grid": dim3(4096), "block": dim3(256, 1, 1), "codegen_method": "serial"})
    assert c.hash() == BASE_HASH
    # It reads "serial", as Mneme's field did, and stays out of the JSON.
    assert c.codegen_method == "serial" and "codegen_method" not in c.to_dict()


def test_from_dict_errors_name_the_field() -> None:
    with pytest.raises(ValueError, match="'grid'"):
        ExperimentConfiguration.from_dict({"block": {"x": 1}})
    with pytest.raises(ValueError, match="'block'"):
        ExperimentConfiguration.from_dict({"grid": {"x": 1}})
    with pytest.raises(ValueError, match="unknown fields \\['blocks'\\]"):
        ExperimentConfiguration.from_dict({**BASE, "blocks": 3})
    with pytest.raises(TypeError, match="max_threads"):
        ExperimentConfiguration.from_dict({**BASE, "max_threads": "many"})
    with pytest.raises(ValueError, match="codegen_opt"):
        ExperimentConfiguration.from_dict({**BASE, "codegen_opt": 4})
    with pytest.raises(ValueError, match="block.x"):
        ExperimentConfiguration.from_dict({"grid": {"x": 1}, "block": {"x": 0}})
    with pytest.raises(TypeError, match="specialize"):
        ExperimentConfiguration.from_dict({**BASE, "specialize": "yes"})


def test_engine_extensions_round_trip() -> None:
    d = {**BASE, "ptxas_opt": 2, "max_registers": 64, "specialize_args": [3], "arch": "sm_90", "specialize": True}
    c = ExperimentConfiguration.from_dict(d)
    assert c.to_dict()["specialize_args"] == [3]
    assert ExperimentConfiguration.from_dict(c.to_dict()) == c
    with pytest.raises(ValueError, match="max_registers"):
        ExperimentConfiguration.from_dict({**BASE, "max_registers": 256})


def test_is_valid_only_checks_launch_bounds() -> None:
    c = ExperimentConfiguration.from_dict({**BASE, "set_launch_bounds": True, "max_threads": 128})
    assert not c.is_valid()
    c.max_threads = 256
    assert c.is_valid()
    # Without launch bounds max_threads is ignored.
    assert ExperimentConfiguration.from_dict({**BASE, "max_threads": 32}).is_valid()
    three_d = ExperimentConfiguration.from_dict(
        {"grid": {"x": 1}, "block": {"x": 16, "y": 16, "z": 2}, "set_launch_bounds": True, "max_threads": 511})
    assert not three_d.is_valid()


def test_ground_zeroes_unused_launch_bounds() -> None:
    a = ExperimentConfiguration.from_dict({**BASE, "max_threads": 512, "min_blocks_per_sm": 4}).ground()
    b = ExperimentConfiguration.from_dict(BASE).ground()
    assert (a.max_threads, a.min_blocks_per_sm) == (0, 0)
    assert a.hash() == b.hash()
    on = ExperimentConfiguration.from_dict({**BASE, "set_launch_bounds": True, "max_threads": 512, "min_blocks_per_sm": 4})
    assert on.ground().to_dict()["max_threads"] == 512


def test_dim3() -> None:
    assert dim3.from_dict({"x": 4}).to_dict() == {"x": 4, "y": 1, "z": 1}
    assert dim3(2, 3, 4).count() == 24
    with pytest.raises(ValueError, match="unknown keys"):
        dim3.from_dict({"x": 1, "w": 2})


def test_result_round_trip_keeps_extra_figures() -> None:
    worker = {"status": "verified", "verified": True, "executed": True, "exec_time": [1000.0, 1100.0],
              "reg_usage": 18, "obj_size": 4096, "gpu_id": 1, "spill_loads": 2, "ptxas_time": 0.004,
              "mismatch": None}
    r = ExperimentResult.from_dict(worker)
    assert r.verified and r.exec_time == [1000.0, 1100.0] and r.reg_usage == 18
    assert r.extra == {"spill_loads": 2, "ptxas_time": 0.004, "mismatch": None}
    assert r.spill_loads == 2
    with pytest.raises(AttributeError, match="no_such"):
        _ = r.no_such
    d = r.to_dict()
    assert d["spill_loads"] == 2 and d["error"] == "" and d["gpu_id"] == 1
    assert ExperimentResult.from_dict(d) == r
    assert ExperimentResult.from_dict({}).exec_time == []
    with pytest.raises(TypeError, match="exec_time"):
        ExperimentResult.from_dict({"exec_time": 5})
