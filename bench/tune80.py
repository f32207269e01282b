"""The 80-configuration vector-add space of tune-80.yaml as a Mneme SearchSpace.

Mneme's users write their spaces as Python classes; `mneme tune
--space-module bench/tune80.py:VecAdd80` runs this one on the same
engine as `--space examples/vecadd/tune-80.yaml`: 5 pipelines x blockDim.x
64..1024 step 64, the grid covering all the recorded threads.
"""

from mneme.mneme_types import ExperimentConfiguration
from mneme.tuning.search_space import CategoricalParam, IntRangeParam, SearchSpace


class VecAdd80(SearchSpace):
    def __init__(self, recorded_kernel):
        self.grid = recorded_kernel.grid_dim
        self.block = recorded_kernel.block_dim
        self.threads = self.grid.x * self.block.x

    def dimensions(self):
        return {
            "pipeline": CategoricalParam("pipeline", ["default<O0>", "default<O1>", "default<O2>", "default<O3>", "default<Os>"]),
            "bx": IntRangeParam("bx", 64, 1024, 64),
        }

    def constraints(self, params):
        return True

    def derived(self, params):
        bx = params["bx"]
        return ExperimentConfiguration.from_dict({
            "grid": {"x": -(-self.threads // bx)}, "block": {"x": bx}, "passes": params["pipeline"]})

    def baseline(self):
        return ExperimentConfiguration.from_dict({"grid": self.grid.to_dict(), "block": self.block.to_dict()})
