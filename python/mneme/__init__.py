"""Python API of mneme: replay and tune kernels recorded by `mneme record`.

Modules follow Mneme's layout: `mneme_types` (configurations and results),
`recorded_execution` (the recording database), `async_executor` (replays on
`mneme worker` processes), `tuning.search_space` and `tuning.sample_strategy`
(search spaces and samplers), and `llvm` (read the recorded IR).
"""

from typing import TYPE_CHECKING, Any

from .mneme_types import ExperimentConfiguration, ExperimentResult, dim3

if TYPE_CHECKING:
    from .binary import find_mneme_binary

__version__ = "0.1.0"
__all__ = ["ExperimentConfiguration", "ExperimentResult", "dim3", "find_mneme_binary", "__version__"]


def __getattr__(name: str) -> Any:
    # find_mneme_binary imports shutil and pathlib: only when asked for, so
    # `python -m mneme.propose` starts without them.
    if name == "find_mneme_binary":
        from .binary import find_mneme_binary

        return find_mneme_binary
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
