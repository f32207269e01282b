"""Random and Optuna sampling strategies (TPE with SQLite storage, NSGA-II)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import optuna
import pytest

from mneme.mneme_types import ExperimentConfiguration
from mneme.tuning.sample_strategy import (
    CONFIG_HASH_ATTR,
    DUPLICATE_ATTR,
    OptunaSamplingStrategy,
    RandomSamplingStrategy,
)
from mneme.tuning.search_space import BoolParam, IntRangeParam, Param, RealRangeParam
from vecadd_space import VecAddSpace

optuna.logging.set_verbosity(optuna.logging.WARNING)


def fake_time(config: ExperimentConfiguration) -> float:
    """A made-up cost with its minimum at block 256 and default<O2>."""
    return abs(config.block.x - 256) + (0 if config.passes == "default<O2>" else 50)


def test_random_count_distinct_and_deterministic() -> None:
    a = list(RandomSamplingStrategy(VecAddSpace(), 30, seed=7))
    b = list(RandomSamplingStrategy(VecAddSpace(), 30, seed=7))
    c = list(RandomSamplingStrategy(VecAddSpace(), 30, seed=8))
    assert len(a) == 30
    assert [s["parameters"] for s in a] == [s["parameters"] for s in b]
    assert [s["parameters"] for s in a] != [s["parameters"] for s in c]
    assert len({s["config"].hash() for s in a}) == 30
    assert set(a[0]["parameters"]) == {"block_dim_x", "passes"}


def test_random_stops_when_the_space_is_exhausted() -> None:
    small = VecAddSpace(lambda p: p["block_dim_x"] == 64)
    samples = list(RandomSamplingStrategy(small, 50, seed=1, max_attempts_per_sample=500))
    assert len(samples) == 5


def test_random_respects_constraints() -> None:
    space = VecAddSpace(lambda p: p["block_dim_x"] % 128 == 0)
    assert all(s["parameters"]["block_dim_x"] % 128 == 0 for s in RandomSamplingStrategy(space, 20, seed=3))


def test_optuna_tpe_with_sqlite_storage(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    study = optuna.create_study(study_name="vecadd", storage=storage, direction="minimize",
                                sampler=optuna.samplers.TPESampler(seed=1, n_startup_trials=10))
    strategy = OptunaSamplingStrategy(VecAddSpace(), study, n_trials=40)
    evaluated = []
    for config, trial in strategy:
        assert isinstance(trial, optuna.trial.Trial)
        evaluated.append(config.hash())
        study.tell(trial, fake_time(config))
    # Every trial is in the study; none evaluated a configuration twice.
    reloaded = optuna.load_study(study_name="vecadd", storage=storage)
    assert len(reloaded.trials) == 40
    assert len(evaluated) == len(set(evaluated))
    assert len(evaluated) + strategy.num_duplicates + strategy.num_rejected == 40
    complete = reloaded.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    assert all(t.user_attrs[CONFIG_HASH_ATTR] for t in complete)
    pruned = reloaded.get_trials(states=(optuna.trial.TrialState.PRUNED,))
    assert all(t.user_attrs.get(DUPLICATE_ATTR) for t in pruned)
    # TPE finds a point near the optimum (block 256 with O2 scores 0).
    assert reloaded.best_value <= 64


def test_optuna_resumes_without_repeating_configurations(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    seen: list[str] = []
    for run in range(2):
        study = optuna.create_study(study_name="resume", storage=storage, load_if_exists=True,
                                    sampler=optuna.samplers.RandomSampler(seed=run))
        for config, trial in OptunaSamplingStrategy(VecAddSpace(), study, n_trials=30):
            seen.append(config.hash())
            study.tell(trial, fake_time(config))
    assert len(seen) == len(set(seen))
    assert len(optuna.load_study(study_name="resume", storage=storage).trials) == 60


def test_optuna_rejected_points_are_pruned() -> None:
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    space = VecAddSpace(lambda p: p["block_dim_x"] <= 512)
    strategy = OptunaSamplingStrategy(space, study, n_trials=20)
    for config, trial in strategy:
        assert config.block.x <= 512
        study.tell(trial, fake_time(config))
    assert strategy.num_rejected > 0
    assert len(study.trials) == 20


class MixedSpace(VecAddSpace):
    """A space with an integer, a boolean and a real parameter (launch-bound fraction)."""

    def dimensions(self) -> Mapping[str, Param]:
        return {"block_dim_x": IntRangeParam("block_dim_x", 64, 1024, 64), "bounds": BoolParam("bounds"),
                "fraction": RealRangeParam("fraction", 0.0, 1.0)}

    def derived(self, params: Mapping[str, Any]) -> ExperimentConfiguration:
        bx = params["block_dim_x"]
        # Project the fraction onto a legal max_threads: a multiple of 64 from bx to 1024.
        max_threads = bx + int(params["fraction"] * (1024 - bx)) // 64 * 64
        return ExperimentConfiguration.from_dict({"grid": {"x": (1 << 20) // bx}, "block": {"x": bx},
                                                  "set_launch_bounds": params["bounds"], "max_threads": max_threads})


def test_optuna_nsga2_two_objectives() -> None:
    study = optuna.create_study(directions=["minimize", "minimize"],
                                sampler=optuna.samplers.NSGAIISampler(seed=2, population_size=8))
    told = 0
    for config, trial in OptunaSamplingStrategy(MixedSpace(), study, n_trials=32):
        assert config.is_valid()
        registers = 255 if not config.set_launch_bounds else max(16, 65536 // config.max_threads // 2)
        study.tell(trial, [fake_time(config), registers])
        told += 1
    assert told > 8
    assert len(study.trials) == 32
    assert study.best_trials and all(len(t.values) == 2 for t in study.best_trials)


def test_optuna_argument_errors() -> None:
    with pytest.raises(ValueError, match="n_trials"):
        OptunaSamplingStrategy(VecAddSpace(), optuna.create_study(), n_trials=-1)
    with pytest.raises(ValueError, match="n must be"):
        RandomSamplingStrategy(VecAddSpace(), -2)


class PipelineSpace(VecAddSpace):
    """A drawn pass pipeline and a choice among block shapes given as tuples."""

    def dimensions(self) -> Mapping[str, Param]:
        from mneme.tuning.search_space import CategoricalParam, PipelineParam

        return {"pipeline": PipelineParam("pipeline", 3, passes=["gvn", "sroa", "instcombine", "licm"]),
                "shape": CategoricalParam("shape", [(64, 1), (32, 2), (16, 4)])}

    def derived(self, params: Mapping[str, Any]) -> ExperimentConfiguration:
        x, y = params["shape"]
        return ExperimentConfiguration.from_dict({"grid": {"x": 1024}, "block": {"x": x, "y": y}, "passes": params["pipeline"]})


def test_optuna_pipeline_and_object_choices() -> None:
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=5))
    hashes: list[str] = []
    for config, trial in OptunaSamplingStrategy(PipelineSpace(), study, n_trials=15):
        assert config.passes.startswith("function(") and config.passes.count(",") == 2
        assert config.block.count() == 64
        hashes.append(config.hash())
        study.tell(trial, float(len(config.passes)))
    assert set(study.trials[0].params) == {"pipeline_0", "pipeline_1", "pipeline_2", "shape"}
    assert study.trials[0].params["shape"] in (0, 1, 2)  # tuples go through their index
    assert len(hashes) == len(set(hashes))
