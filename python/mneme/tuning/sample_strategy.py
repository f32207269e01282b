"""Ways to walk a SearchSpace: exhaustive, random, or with an Optuna study.

`ExhaustiveSamplingStrategy` yields every configuration the constraints allow;
`RandomSamplingStrategy` yields `{"parameters": ..., "config": ...}` dicts;
`OptunaSamplingStrategy` yields `(config, trial)` pairs and the caller tells
the study the trial's outcome. The Optuna strategy never hands out a
configuration that another trial of the same study (in this process or any
other process sharing the storage) already claimed: such a trial is told as
pruned without being evaluated.
"""

from __future__ import annotations

import itertools
import random
from typing import Any, Iterator, Mapping

from ..mneme_types import ExperimentConfiguration
from .search_space import Param, SearchSpace

__all__ = [
    "ExhaustiveSamplingStrategy",
    "RandomSamplingStrategy",
    "OptunaSamplingStrategy",
    "CONFIG_HASH_ATTR",
    "DUPLICATE_ATTR",
]

# Trial user attributes written by OptunaSamplingStrategy.
CONFIG_HASH_ATTR = "mneme_config_hash"
DUPLICATE_ATTR = "mneme_duplicate"


def _dimensions(space: SearchSpace) -> Mapping[str, Param]:
    dims = space.dimensions()
    if not isinstance(dims, Mapping) or not dims:
        raise ValueError(f"{type(space).__name__}.dimensions() must return a non-empty mapping of name to parameter")
    for name, p in dims.items():
        if not isinstance(p, Param):
            raise TypeError(f"{type(space).__name__}.dimensions()[{name!r}]: want a parameter object, got {p!r}")
    return dims


def _derive(space: SearchSpace, params: Mapping[str, Any]) -> ExperimentConfiguration:
    config = space.derived(params)
    if not isinstance(config, ExperimentConfiguration):
        raise TypeError(f"{type(space).__name__}.derived() must return an ExperimentConfiguration, got {type(config).__name__}")
    return config


class ExhaustiveSamplingStrategy:
    """Every point of the space in product order (the last dimension varies fastest)."""

    def __init__(self, space: SearchSpace):
        self.space = space
        self.dimensions = _dimensions(space)

    def points(self) -> Iterator[dict[str, Any]]:
        """The parameter dicts that pass the constraints, in order."""
        names = list(self.dimensions)
        for combo in itertools.product(*(self.dimensions[n].values() for n in names)):
            params = dict(zip(names, combo))
            if self.space.constraints(params):
                yield params

    def __iter__(self) -> Iterator[ExperimentConfiguration]:
        for params in self.points():
            yield _derive(self.space, params)


class RandomSamplingStrategy:
    """`n` points drawn uniformly, distinct where the space allows, reproducible with `seed`."""

    def __init__(self, space: SearchSpace, n: int, seed: int | None = None, max_attempts_per_sample: int = 1000):
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"RandomSamplingStrategy: n must be a non-negative integer, got {n!r}")
        self.space = space
        self.n = n
        self.seed = seed
        self.max_attempts_per_sample = max_attempts_per_sample
        self.dimensions = _dimensions(space)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        rng = random.Random(self.seed)
        seen: set[str] = set()
        produced = 0
        while produced < self.n:
            for _ in range(self.max_attempts_per_sample):
                params = {name: p.sample(rng) for name, p in self.dimensions.items()}
                if not self.space.constraints(params):
                    continue
                config = _derive(self.space, params)
                h = config.hash()
                if h in seen:
                    continue
                seen.add(h)
                break
            else:
                # The constraints reject nearly everything, or the space is exhausted.
                return
            produced += 1
            yield {"parameters": params, "config": config}


class OptunaSamplingStrategy:
    """`n_trials` trials asked from an Optuna study (any sampler, any storage).

    Yields `(config, trial)`; the caller evaluates the configuration and calls
    `study.tell(trial, value_or_values)`. Points the constraints reject, and
    configurations some other trial of the study already holds, are told
    pruned here; they count toward `n_trials` (each is a trial of the study).
    """

    def __init__(self, space: SearchSpace, study: Any, n_trials: int):
        if isinstance(n_trials, bool) or not isinstance(n_trials, int) or n_trials < 0:
            raise ValueError(f"OptunaSamplingStrategy: n_trials must be a non-negative integer, got {n_trials!r}")
        self.space = space
        self.study = study
        self.n_trials = n_trials
        self.dimensions = _dimensions(space)
        self.num_rejected = 0
        self.num_duplicates = 0

    def _claimed_elsewhere(self, trial: Any, config_hash: str) -> bool:
        import optuna

        # Claim first, then look: of two trials that claim one configuration
        # concurrently, at least one sees the other's claim (each writes
        # before it reads), so the configuration is never evaluated twice.
        trial.set_user_attr(CONFIG_HASH_ATTR, config_hash)
        states = (optuna.trial.TrialState.RUNNING, optuna.trial.TrialState.COMPLETE,
                  optuna.trial.TrialState.WAITING, optuna.trial.TrialState.FAIL)
        for other in self.study.get_trials(deepcopy=False, states=states):
            if other.number == trial.number:
                continue
            attrs = other.user_attrs
            if attrs.get(CONFIG_HASH_ATTR) == config_hash and not attrs.get(DUPLICATE_ATTR):
                return True
        return False

    def __iter__(self) -> Iterator[tuple[ExperimentConfiguration, Any]]:
        import optuna

        for _ in range(self.n_trials):
            trial = self.study.ask()
            params = {name: p.suggest(trial) for name, p in self.dimensions.items()}
            if not self.space.constraints(params):
                self.num_rejected += 1
                trial.set_user_attr("mneme_rejected", True)
                self.study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                continue
            config = _derive(self.space, params)
            if self._claimed_elsewhere(trial, config.hash()):
                self.num_duplicates += 1
                trial.set_user_attr(DUPLICATE_ATTR, True)
                self.study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                continue
            yield config, trial
