"""A tuned configuration as Proteus's tuned-kernels file, as Mneme's `mneme.convert` writes it.

`convert_to_json(filename, recorded_execution, kernel, config)` writes
`{kernel name: entry}` for `PROTEUS_TUNED_KERNELS` and prints how to use it.
The entry is the one `mneme tune` exports (`tune.ProteusEntry` in Go, which
tune/proteus_python_test.go compares with `proteus_entry` here): Proteus's
OptLevel is the level of a `default<On>` pipeline, read as a string ("3" for
any other pipeline, which travels in Pipeline); TunedMaxThreads is -1
without launch bounds, Proteus's default.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from .mneme_types import ExperimentConfiguration
from .recorded_execution import KernelInstance, RecordedExecution

__all__ = ["convert_to_json", "proteus_entry"]

_OPT_LEVEL = re.compile(r"^default<O([0-3sz])>$")


def proteus_entry(config: ExperimentConfiguration) -> dict[str, Any]:
    """One kernel's entry of a PROTEUS_TUNED_KERNELS file, keys in Proteus's order."""
    m = _OPT_LEVEL.match(config.passes)
    return {
        "Pipeline": config.passes,
        "CodeGen": "serial",
        "SpecializeArgs": config.specialize,
        "LaunchBounds": config.set_launch_bounds,
        "SpecializeDims": config.specialize_dims,
        "SpecializeDimsRange": config.specialize_dims,
        "OptLevel": m.group(1) if m else "3",
        "CodeGenOptLevel": config.codegen_opt,
        "TunedMaxThreads": config.max_threads if config.set_launch_bounds else -1,
        "MinBlocksPerSM": config.min_blocks_per_sm,
    }


def convert_to_json(
    filename: str | os.PathLike[str],
    recorded_execution: RecordedExecution,
    kernel_descr: KernelInstance,
    config: ExperimentConfiguration,
) -> None:
    """Writes the Proteus file for the kernel and prints how to use it."""
    if not isinstance(config, ExperimentConfiguration):
        raise TypeError(f"convert_to_json: want an ExperimentConfiguration, got {type(config).__name__}")
    name = kernel_descr.kernel_name or recorded_execution.kernel_name
    if not name:
        raise ValueError(f"convert_to_json: {recorded_execution.path} names no kernel")
    path = Path(filename)
    path.write_text(json.dumps({name: proteus_entry(config)}, indent=2) + "\n")
    folded = ",".join(str(i + 1) for i, v in enumerate(kernel_descr.specializations) if v)
    print()
    print(f"To use the optimized kernel version for the kernel '{recorded_execution.demangled_name or name}'")
    print("apply this attribute:")
    print(f'__attribute__((annotate("jit", {folded})))')
    print("... and configure your project to build with proteus")
    print(f"lastly execute the application by\nexport PROTEUS_TUNED_KERNELS={path.resolve()}")
    print("(an application built with the mneme compilers reads the same file without rebuilding: README, Tuned kernels)")
    print()
