"""The Python package against the Go engine's vocabulary (mneme/vocabulary.json)."""

from __future__ import annotations

import dataclasses
import typing
import warnings

import pytest

from mneme import mneme_types, propose, vocabulary
from mneme.mneme_types import ExperimentConfiguration, dim3

# The Python type each Go value kind takes.
KIND_TYPES = {"dim3": dim3, "uint": int, "int": int, "bool": bool, "string": str, "ints": list}


def test_every_configuration_key_is_a_field_of_its_kind() -> None:
    hints = typing.get_type_hints(ExperimentConfiguration)
    fields = [f.name for f in dataclasses.fields(ExperimentConfiguration)]
    # Every key of the Go table, original and fp_contract included, and no other.
    assert sorted(fields) == sorted(vocabulary.CONFIG_KEYS)
    for f in vocabulary.VOCABULARY["config"]:
        want = KIND_TYPES[f["kind"]]
        got = typing.get_origin(hints[f["key"]]) or hints[f["key"]]
        assert got is want, f"{f['key']}: Go kind {f['kind']}, Python {hints[f['key']]}"


def test_statuses_are_the_engines() -> None:
    assert mneme_types.STATUSES == vocabulary.STATUSES
    assert "verified" in vocabulary.STATUSES and "crashed" in vocabulary.STATUSES


def test_pruners_are_the_engines() -> None:
    pytest.importorskip("optuna")
    # Every pruner the engine accepts opens a study in the proposer.
    for pruner in vocabulary.PRUNERS:
        assert propose._open_study({"pruner": pruner}) is not None


def test_original_and_fp_contract_round_trip() -> None:
    c = ExperimentConfiguration.from_dict({"grid": {"x": 8}, "block": {"x": 256}, "original": True, "fp_contract": "off"})
    d = c.to_dict()
    assert d["original"] is True and d["fp_contract"] == "off"
    assert ExperimentConfiguration.from_dict(d) == c
    # Unset, they stay out of the JSON, so Mneme's hash of a configuration holds.
    plain = ExperimentConfiguration.from_dict({"grid": {"x": 8}, "block": {"x": 256}}).to_dict()
    assert "original" not in plain and "fp_contract" not in plain
    with pytest.raises(ValueError, match="fp_contract"):
        ExperimentConfiguration.from_dict({"grid": {"x": 8}, "block": {"x": 256}, "fp_contract": "sometimes"})


def test_mnemes_leniency() -> None:
    base = {"grid": {"x": 8}, "block": {"x": 256}}
    # A fraction as max_threads while launch bounds are off: Mneme's class
    # keeps it unused; here it is accepted, ignored with a warning.
    with pytest.warns(UserWarning, match="max_threads=0.5 is ignored without launch bounds"):
        c = ExperimentConfiguration.from_dict({**base, "max_threads": 0.5})
    assert c.max_threads == 1024
    # With launch bounds on it matters, and a fraction is an error.
    with pytest.raises(TypeError, match="max_threads"):
        ExperimentConfiguration.from_dict({**base, "set_launch_bounds": True, "max_threads": 0.5})
    # Integral floats and numpy-like integers are coerced, as ctypes does in Mneme.
    c = ExperimentConfiguration.from_dict({"grid": {"x": 8.0}, "block": {"x": 256}, "codegen_opt": 2.0, "specialize": 1})
    assert c.grid.x == 8 and isinstance(c.grid.x, int) and c.codegen_opt == 2 and c.specialize is True
    # codegen_method, a field Mneme dropped: accepted; a value other than
    # serial is ignored with a warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ExperimentConfiguration.from_dict({**base, "codegen_method": "serial"})
    with pytest.warns(UserWarning, match="codegen_method='parallel' is ignored"):
        c = ExperimentConfiguration.from_dict({**base, "codegen_method": "parallel"})
    assert "codegen_method" not in c.to_dict()
    with pytest.raises(TypeError, match="codegen_opt"):
        ExperimentConfiguration.from_dict({**base, "codegen_opt": 2.5})


def test_mnemes_published_vector_add_space_derives() -> None:
    """The space of Mneme's CUDA vector-add tuning example (a fraction as
    max_threads without launch bounds, codegen_method, a 120-pass pipeline),
    sampled as that script samples it: every point derives."""
    optuna = pytest.importorskip("optuna")
    from mneme.tuning.sample_strategy import OptunaSamplingStrategy
    from mneme.tuning.search_space import BoolParam, CategoricalParam, IntRangeParam, PipelineParam, RealRangeParam, SearchSpace

    class EntireSpace(SearchSpace):
        def dimensions(self):  # type: ignore[no-untyped-def]
            return {"block_dim_x": IntRangeParam("block_dim_x", low=64, high=1024, step=64),
                    "specialize": BoolParam("specialize"), "specialize_dims": BoolParam("specialize_dims"),
                    "max_threads_fraction": RealRangeParam("max_threads_fraction", low=0.0, high=1.0),
                    "min_blocks_per_sm": IntRangeParam("min_blocks_per_sm", low=1, high=8),
                    "set_launch_bounds": BoolParam("set_launch_bounds"),
                    "codegen_opt": IntRangeParam("codegen_opt", low=1, high=3, step=1),
                    "codegen_method": CategoricalParam("codegen_method", ["serial"]),
                    "passes": PipelineParam("passes", 120)}

        def derived(self, params):  # type: ignore[no-untyped-def]
            d = {"block": {"x": params["block_dim_x"], "y": 1, "z": 1}, "grid": {"x": 4096, "y": 1, "z": 1},
                 "shared_mem": 0, "specialize": params["specialize"], "specialize_dims": params["specialize_dims"],
                 "min_blocks_per_sm": params["min_blocks_per_sm"], "set_launch_bounds": params["set_launch_bounds"],
                 "max_threads": params["max_threads_fraction"], "codegen_opt": params["codegen_opt"],
                 "codegen_method": params["codegen_method"], "passes": params["passes"]}
            if not params["set_launch_bounds"]:
                return ExperimentConfiguration.from_dict(d)
            d["max_threads"] = params["block_dim_x"] + round((1024 - params["block_dim_x"]) * params["max_threads_fraction"] / 64) * 64
            return ExperimentConfiguration.from_dict(d)

        def constraints(self, params):  # type: ignore[no-untyped-def]
            return True

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        configs = []
        for config, trial in OptunaSamplingStrategy(EntireSpace(), study, 30):
            configs.append(config)
            study.tell(trial, 1.0)
    assert len(configs) == 30
    assert any(not c.set_launch_bounds for c in configs) and any(c.set_launch_bounds for c in configs)
    assert all(c.is_valid() for c in configs if c.set_launch_bounds)
