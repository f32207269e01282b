"""The vector-add search space of the tuning example, shared by several tests."""

from __future__ import annotations

from typing import Any, Mapping

from mneme.mneme_types import ExperimentConfiguration
from mneme.tuning.search_space import CategoricalParam, IntRangeParam, Param, SearchSpace

PIPELINES = ["default<O1>", "default<O2>", "default<O3>", "default<Os>", "default<Oz>"]


class VecAddSpace(SearchSpace):
    """The 80-point space of the vector-add tuning example."""

    def __init__(self, constraint: Any = None):
        self.constraint = constraint

    def dimensions(self) -> Mapping[str, Param]:
        return {"block_dim_x": IntRangeParam("block_dim_x", 64, 1024, 64), "passes": CategoricalParam("passes", PIPELINES)}

    def constraints(self, params: Mapping[str, Any]) -> bool:
        return True if self.constraint is None else bool(self.constraint(params))

    def derived(self, params: Mapping[str, Any]) -> ExperimentConfiguration:
        n = 1 << 20
        bx = params["block_dim_x"]
        return ExperimentConfiguration.from_dict(
            {"grid": {"x": (n + bx - 1) // bx}, "block": {"x": bx}, "passes": params["passes"]})

    def baseline(self) -> ExperimentConfiguration:
        return ExperimentConfiguration.from_dict({"grid": {"x": 4096}, "block": {"x": 256}})
