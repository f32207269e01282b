"""Search spaces: the user's tuning parameters and their map to configurations.

A `SearchSpace` names its parameters (`dimensions()`), rejects points it does
not want (`constraints(params)`), turns a point into a replay configuration
(`derived(params)`) and gives the configuration speedups are measured against
(`baseline()`). The parameter classes know how to enumerate their values (for
exhaustive search), draw one at random, and ask an Optuna trial for one.
"""

from __future__ import annotations

import abc
import itertools
import math
import random
from typing import Any, Iterable, Iterator, Mapping, Sequence

from ..mneme_types import ExperimentConfiguration

__all__ = [
    "Param",
    "FixedParam",
    "BoolParam",
    "CategoricalParam",
    "IntRangeParam",
    "RealRangeParam",
    "PipelineParam",
    "SearchSpace",
    "DEFAULT_PIPELINE_PASSES",
]


class Param(abc.ABC):
    """One tunable parameter."""

    def __init__(self, name: str):
        if not isinstance(name, str) or not name:
            raise ValueError(f"{type(self).__name__}: name must be a non-empty string, got {name!r}")
        self.name = name

    @abc.abstractmethod
    def values(self) -> Iterable[Any]:
        """Every value, in order; raises TypeError when the set is not finite."""

    @abc.abstractmethod
    def sample(self, rng: random.Random) -> Any:
        """One value drawn uniformly."""

    @abc.abstractmethod
    def suggest(self, trial: Any) -> Any:
        """One value asked from an Optuna trial (`trial.suggest_*`)."""

    def size(self) -> float:
        """Number of values (math.inf for a continuous range)."""
        return float(sum(1 for _ in self.values()))

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({fields})"


def _optuna_choice(value: Any) -> bool:
    # Optuna stores categorical choices only of these types.
    return value is None or isinstance(value, (bool, int, float, str))


class FixedParam(Param):
    """A parameter with one value; it takes no part in sampling."""

    def __init__(self, name: str, value: Any):
        super().__init__(name)
        self.value = value

    def values(self) -> list[Any]:
        return [self.value]

    def sample(self, rng: random.Random) -> Any:
        return self.value

    def suggest(self, trial: Any) -> Any:
        return self.value


class CategoricalParam(Param):
    """One of a list of choices."""

    def __init__(self, name: str, choices: Sequence[Any]):
        super().__init__(name)
        if isinstance(choices, (str, bytes)) or not isinstance(choices, Sequence) or len(choices) == 0:
            raise ValueError(f"CategoricalParam {name!r}: choices must be a non-empty list, got {choices!r}")
        self.choices = list(choices)

    def values(self) -> list[Any]:
        return list(self.choices)

    def sample(self, rng: random.Random) -> Any:
        return rng.choice(self.choices)

    def suggest(self, trial: Any) -> Any:
        if all(_optuna_choice(c) for c in self.choices):
            return trial.suggest_categorical(self.name, self.choices)
        # Other objects (dicts, tuples) go through their index.
        index = trial.suggest_categorical(self.name, list(range(len(self.choices))))
        return self.choices[index]


class BoolParam(CategoricalParam):
    """False or True."""

    def __init__(self, name: str):
        super().__init__(name, [False, True])


class IntRangeParam(Param):
    """Integers low, low+step, ... up to high inclusive."""

    def __init__(self, name: str, low: int, high: int, step: int = 1):
        super().__init__(name)
        for field_name, v in (("low", low), ("high", high), ("step", step)):
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"IntRangeParam {name!r}: {field_name} must be an integer, got {v!r}")
        if step <= 0:
            raise ValueError(f"IntRangeParam {name!r}: step must be positive, got {step}")
        if low > high:
            raise ValueError(f"IntRangeParam {name!r}: low {low} is above high {high}")
        self.low, self.high, self.step = low, high, step

    @property
    def last(self) -> int:
        """The largest value actually in the range (high rounded down onto the step)."""
        return self.low + (self.high - self.low) // self.step * self.step

    def values(self) -> range:
        return range(self.low, self.high + 1, self.step)

    def size(self) -> float:
        return float(len(self.values()))

    def sample(self, rng: random.Random) -> int:
        return rng.choice(self.values())

    def suggest(self, trial: Any) -> int:
        return int(trial.suggest_int(self.name, self.low, self.last, step=self.step))


class RealRangeParam(Param):
    """A real number in [low, high]; continuous, so not enumerable."""

    def __init__(self, name: str, low: float, high: float, log: bool = False):
        super().__init__(name)
        for field_name, v in (("low", low), ("high", high)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise TypeError(f"RealRangeParam {name!r}: {field_name} must be a finite number, got {v!r}")
        if low > high:
            raise ValueError(f"RealRangeParam {name!r}: low {low} is above high {high}")
        if log and low <= 0:
            raise ValueError(f"RealRangeParam {name!r}: a log scale needs low > 0, got {low}")
        self.low, self.high, self.log = float(low), float(high), log

    def values(self) -> Iterable[float]:
        raise TypeError(f"RealRangeParam {self.name!r} is continuous and cannot be enumerated; use a random or Optuna sampler")

    def size(self) -> float:
        return math.inf

    def sample(self, rng: random.Random) -> float:
        if self.log:
            return math.exp(rng.uniform(math.log(self.low), math.log(self.high)))
        return rng.uniform(self.low, self.high)

    def suggest(self, trial: Any) -> float:
        return float(trial.suggest_float(self.name, self.low, self.high, log=self.log))


# Function passes of LLVM's new pass manager that are safe to run in any order
# on a kernel; a PipelineParam draws from these.
DEFAULT_PIPELINE_PASSES: tuple[str, ...] = (
    "instcombine",
    "simplifycfg",
    "sroa",
    "early-cse",
    "gvn",
    "licm",
    "loop-unroll",
    "loop-rotate",
    "indvars",
    "sccp",
    "dce",
    "adce",
    "dse",
    "reassociate",
    "mem2reg",
    "jump-threading",
    "correlated-propagation",
    "slp-vectorizer",
    "load-store-vectorizer",
    "infer-address-spaces",
)


class PipelineParam(Param):
    """A pass pipeline of `num_draws` passes, each drawn from `passes`.

    The value is pipeline text for the new pass manager,
    `function(p1,p2,...)`. Each draw is its own Optuna parameter
    (`<name>_0`, `<name>_1`, ...), so samplers learn which pass helps where.
    """

    def __init__(self, name: str, num_draws: int, passes: Sequence[str] = DEFAULT_PIPELINE_PASSES):
        super().__init__(name)
        if isinstance(num_draws, bool) or not isinstance(num_draws, int) or num_draws < 1:
            raise ValueError(f"PipelineParam {name!r}: num_draws must be a positive integer, got {num_draws!r}")
        if not passes or any(not isinstance(p, str) or not p for p in passes):
            raise ValueError(f"PipelineParam {name!r}: passes must be non-empty pass names, got {passes!r}")
        self.num_draws = num_draws
        self.passes = list(passes)

    @staticmethod
    def text(passes: Iterable[str]) -> str:
        return "function(" + ",".join(passes) + ")"

    def values(self) -> Iterator[str]:
        return (self.text(p) for p in itertools.product(self.passes, repeat=self.num_draws))

    def size(self) -> float:
        return float(len(self.passes) ** self.num_draws)

    def sample(self, rng: random.Random) -> str:
        return self.text(rng.choice(self.passes) for _ in range(self.num_draws))

    def suggest(self, trial: Any) -> str:
        return self.text(trial.suggest_categorical(f"{self.name}_{i}", self.passes) for i in range(self.num_draws))


class SearchSpace(abc.ABC):
    """A tuning problem: parameters, constraints, and their map to configurations."""

    @abc.abstractmethod
    def dimensions(self) -> Mapping[str, Param]:
        """The parameters by name; exhaustive order follows this mapping's order."""

    @abc.abstractmethod
    def constraints(self, params: Mapping[str, Any]) -> bool:
        """False rejects the point before any configuration is built."""

    @abc.abstractmethod
    def derived(self, params: Mapping[str, Any]) -> ExperimentConfiguration:
        """The replay configuration of a point."""

    def baseline(self) -> ExperimentConfiguration:
        """The reference configuration, usually the recorded launch."""
        raise NotImplementedError(f"{type(self).__name__} defines no baseline()")

    def size(self) -> float:
        """Number of points before constraints (math.inf when a parameter is continuous)."""
        total = 1.0
        for p in self.dimensions().values():
            total *= p.size()
        return total
