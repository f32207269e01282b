"""Parameters, search spaces and the exhaustive order."""

from __future__ import annotations

import math
import random
from typing import Mapping

import pytest

from mneme.tuning.sample_strategy import ExhaustiveSamplingStrategy
from mneme.tuning.search_space import (
    BoolParam,
    CategoricalParam,
    FixedParam,
    IntRangeParam,
    Param,
    PipelineParam,
    RealRangeParam,
    SearchSpace,
)

from vecadd_space import VecAddSpace


def test_int_range_is_inclusive() -> None:
    assert list(IntRangeParam("b", 64, 1024, 64).values()) == list(range(64, 1025, 64))
    assert len(list(IntRangeParam("b", 64, 1024, 64).values())) == 16
    assert list(IntRangeParam("k", 1, 10, 4).values()) == [1, 5, 9]
    assert IntRangeParam("k", 1, 10, 4).last == 9
    assert list(IntRangeParam("one", 3, 3).values()) == [3]


def test_param_errors_name_the_parameter() -> None:
    with pytest.raises(ValueError, match="'b'.*low 9 is above high 1"):
        IntRangeParam("b", 9, 1)
    with pytest.raises(ValueError, match="'b'.*step"):
        IntRangeParam("b", 1, 9, 0)
    with pytest.raises(TypeError, match="'b'.*low"):
        IntRangeParam("b", 1.5, 9)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'c'.*choices"):
        CategoricalParam("c", [])
    with pytest.raises(ValueError, match="'p'.*num_draws"):
        PipelineParam("p", 0)
    with pytest.raises(TypeError, match="continuous"):
        list(RealRangeParam("r", 0.0, 1.0).values())


def test_small_params() -> None:
    assert BoolParam("s").values() == [False, True]
    assert FixedParam("f", 7).values() == [7]
    rng = random.Random(1)
    assert 0.0 <= RealRangeParam("r", 0.0, 1.0).sample(rng) <= 1.0
    assert 1e-3 <= RealRangeParam("r", 1e-3, 1.0, log=True).sample(rng) <= 1.0
    p = PipelineParam("pipe", 2, passes=["gvn", "dce", "sroa"])
    assert p.size() == 9
    values = list(p.values())
    assert values[0] == "function(gvn,gvn)" and values[1] == "function(gvn,dce)" and len(values) == 9
    assert p.sample(rng).startswith("function(")


def test_exhaustive_order_last_dimension_fastest() -> None:
    configs = list(ExhaustiveSamplingStrategy(VecAddSpace()))
    assert len(configs) == 80
    assert [(c.block.x, c.passes) for c in configs[:6]] == [
        (64, "default<O1>"), (64, "default<O2>"), (64, "default<O3>"), (64, "default<Os>"), (64, "default<Oz>"),
        (128, "default<O1>")]
    assert (configs[-1].block.x, configs[-1].passes) == (1024, "default<Oz>")
    assert configs[0].grid.x == 16384
    assert len({c.hash() for c in configs}) == 80
    assert VecAddSpace().size() == 80


def test_exhaustive_applies_constraints() -> None:
    space = VecAddSpace(lambda p: p["block_dim_x"] <= 256 and p["passes"] != "default<Oz>")
    configs = list(ExhaustiveSamplingStrategy(space))
    assert len(configs) == 4 * 4
    assert all(c.block.x <= 256 and c.passes != "default<Oz>" for c in configs)


def test_exhaustive_refuses_a_continuous_dimension() -> None:
    class Continuous(VecAddSpace):
        def dimensions(self) -> Mapping[str, Param]:
            return {"f": RealRangeParam("f", 0.0, 1.0)}

    assert math.isinf(Continuous().size())
    with pytest.raises(TypeError, match="'f' is continuous"):
        list(ExhaustiveSamplingStrategy(Continuous()))


def test_search_space_is_abstract() -> None:
    with pytest.raises(TypeError):
        SearchSpace()  # type: ignore[abstract]
