"""Search spaces and the strategies that sample them."""

from .sample_strategy import ExhaustiveSamplingStrategy, OptunaSamplingStrategy, RandomSamplingStrategy
from .search_space import (
    BoolParam,
    CategoricalParam,
    FixedParam,
    IntRangeParam,
    Param,
    PipelineParam,
    RealRangeParam,
    SearchSpace,
)

__all__ = [
    "BoolParam",
    "CategoricalParam",
    "ExhaustiveSamplingStrategy",
    "FixedParam",
    "IntRangeParam",
    "OptunaSamplingStrategy",
    "Param",
    "PipelineParam",
    "RandomSamplingStrategy",
    "RealRangeParam",
    "SearchSpace",
]
