"""Python API of mneme: replay and tune kernels recorded by `mneme record`.

Modules follow Mneme's layout: `mneme_types` (configurations and results),
`recorded_execution` (the recording database), `async_executor` (replays on
`mneme worker` processes), `tuning.search_space` and `tuning.sample_strategy`
(search spaces and samplers), and `llvm` (read the recorded IR).
"""

from .binary import find_mneme_binary
from .mneme_types import ExperimentConfiguration, ExperimentResult, dim3

__version__ = "0.1.0"
__all__ = ["ExperimentConfiguration", "ExperimentResult", "dim3", "find_mneme_binary", "__version__"]
