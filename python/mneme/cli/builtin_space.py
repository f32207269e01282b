"""The built-in search space of `mneme tune` when no --space-module is given.

It is derived from the recorded launch: block shapes over the selected launch
axes (the grid is resized so the same threads are covered), the compiler
pipeline and codegen level, and the specialization and launch-bounds toggles.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..mneme_types import ExperimentConfiguration
from ..recorded_execution import KernelInstance
from ..tuning.search_space import BoolParam, CategoricalParam, FixedParam, IntRangeParam, Param, SearchSpace

PRESETS = ("quick", "standard", "launch", "compiler", "full")
LAUNCH_DIMS = ("none", "auto", "x", "xy", "xyz")
SAFETIES = ("conservative", "balanced", "aggressive")
BOOL_MODES = ("fixed", "on", "off", "on-off")
MAX_THREADS_POLICIES = ("recorded", "block-threads", "powers-of-two", "hardware")

ALL_PIPELINES = ["default<O1>", "default<O2>", "default<O3>", "default<Os>", "default<Oz>"]
MAX_BLOCK_THREADS = 1024
WARP = 32


@dataclass
class PresetDefaults:
    """What a preset tunes when the matching flag is not given."""

    launch_dim: str
    passes: list[str]
    codegen_opt: tuple[int, int] | None  # None: fixed at the configuration's default
    specialize: str
    specialize_dims: str
    launch_bounds: str
    safety: str = "balanced"
    extra: dict[str, Any] = field(default_factory=dict)


PRESET_DEFAULTS: dict[str, PresetDefaults] = {
    "quick": PresetDefaults("auto", ["default<O2>", "default<O3>"], None, "fixed", "fixed", "fixed", "conservative"),
    "standard": PresetDefaults("auto", ["default<O1>", "default<O2>", "default<O3>"], (2, 3), "on-off", "fixed", "fixed"),
    "launch": PresetDefaults("auto", ["default<O3>"], None, "fixed", "fixed", "fixed"),
    "compiler": PresetDefaults("none", list(ALL_PIPELINES), (0, 3), "on-off", "fixed", "fixed"),
    "full": PresetDefaults("auto", list(ALL_PIPELINES), (0, 3), "on-off", "on-off", "on-off", "aggressive"),
}


def default_safety(preset: str) -> str:
    """The launch safety a preset implies when --launch-safety is not given."""
    return PRESET_DEFAULTS[preset].safety


def _axes(launch_dim: str, block: Sequence[int]) -> str:
    if launch_dim == "none":
        return ""
    if launch_dim == "auto":
        # The axes the application itself uses; a 1-D launch tunes x.
        used = "".join(a for a, n in zip("xyz", block) if n > 1)
        return used or "x"
    return launch_dim


def _axis_values(axis: str, recorded: int, safety: str) -> list[int]:
    if safety == "conservative":
        vals = {recorded // 2, recorded, recorded * 2}
    elif safety == "balanced":
        low = WARP if axis == "x" else 1
        vals = {1 << k for k in range(11) if (1 << k) >= low} | {recorded}
    else:
        vals = set(range(WARP, MAX_BLOCK_THREADS + 1, WARP)) if axis == "x" else {1 << k for k in range(11)}
        vals.add(recorded)
    return sorted(v for v in vals if 1 <= v <= MAX_BLOCK_THREADS)


def _bool_param(name: str, mode: str, fixed: bool) -> Param:
    if mode == "on":
        return FixedParam(name, True)
    if mode == "off":
        return FixedParam(name, False)
    if mode == "on-off":
        return BoolParam(name)
    return FixedParam(name, fixed)


class BuiltinSpace(SearchSpace):
    """The space the flags describe over one recorded kernel instance."""

    def __init__(
        self,
        kernel: KernelInstance,
        *,
        preset: str = "standard",
        launch_dim: str | None = None,
        launch_safety: str | None = None,
        passes: Sequence[str] | None = None,
        codegen_opt: Sequence[int] | None = None,
        specialize: str | None = None,
        specialize_dims: str | None = None,
        launch_bounds: str | None = None,
        max_threads_policy: str = "block-threads",
        max_threads_range: tuple[int, int, int] | None = None,
        min_blocks_per_sm_range: tuple[int, int, int] | None = None,
    ):
        d = PRESET_DEFAULTS[preset]
        self.kernel = kernel
        self.recorded_block = (kernel.block_dim.x, kernel.block_dim.y, kernel.block_dim.z)
        self.recorded_grid = (kernel.grid_dim.x, kernel.grid_dim.y, kernel.grid_dim.z)
        self.shared_mem = kernel.shared_mem
        self.safety = launch_safety or d.safety
        self.axes = _axes(launch_dim or d.launch_dim, self.recorded_block)
        self.max_threads_policy = max_threads_policy
        self.banned: set[str] = set()

        dims: dict[str, Param] = {}
        shapes = self._block_shapes()
        dims["block_shape"] = CategoricalParam("block_shape", shapes) if len(shapes) > 1 else FixedParam("block_shape", shapes[0])
        pipes = list(passes) if passes else d.passes
        dims["passes"] = CategoricalParam("passes", pipes) if len(pipes) > 1 else FixedParam("passes", pipes[0])
        if codegen_opt is not None and len(codegen_opt) > 1:
            dims["codegen_opt"] = CategoricalParam("codegen_opt", list(codegen_opt))
        elif codegen_opt is not None:
            dims["codegen_opt"] = FixedParam("codegen_opt", codegen_opt[0])
        elif d.codegen_opt is not None:
            dims["codegen_opt"] = IntRangeParam("codegen_opt", d.codegen_opt[0], d.codegen_opt[1])
        else:
            dims["codegen_opt"] = FixedParam("codegen_opt", 3)
        dims["specialize"] = _bool_param("specialize", specialize or d.specialize, False)
        dims["specialize_dims"] = _bool_param("specialize_dims", specialize_dims or d.specialize_dims, False)
        dims["set_launch_bounds"] = _bool_param("set_launch_bounds", launch_bounds or d.launch_bounds, False)
        bounds_possible = dims["set_launch_bounds"].values() != [False]
        if bounds_possible and max_threads_range is not None:
            lo, hi, step = max_threads_range
            dims["max_threads"] = IntRangeParam("max_threads", lo, hi, step)
        elif bounds_possible and max_threads_policy == "powers-of-two":
            dims["max_threads"] = CategoricalParam("max_threads", [1 << k for k in range(5, 11)])
        if bounds_possible and min_blocks_per_sm_range is not None:
            lo, hi, step = min_blocks_per_sm_range
            dims["min_blocks_per_sm"] = IntRangeParam("min_blocks_per_sm", lo, hi, step)
        self._dims = dims

    def _block_shapes(self) -> list[str]:
        per_axis: list[list[int]] = []
        for i, axis in enumerate("xyz"):
            rec = self.recorded_block[i]
            per_axis.append(_axis_values(axis, rec, self.safety) if axis in self.axes else [rec])
        shapes = []
        for x in per_axis[0]:
            for y in per_axis[1]:
                for z in per_axis[2]:
                    n = x * y * z
                    if n > MAX_BLOCK_THREADS:
                        continue
                    # Less than aggressive keeps whole warps.
                    if self.safety != "aggressive" and n % WARP and (x, y, z) != self.recorded_block:
                        continue
                    shapes.append(f"{x}x{y}x{z}")
        return shapes

    @staticmethod
    def parse_shape(shape: str) -> tuple[int, int, int]:
        """'XxYxZ' as three integers."""
        x, y, z = (int(v) for v in shape.split("x"))
        return x, y, z

    def dimensions(self) -> Mapping[str, Param]:
        return self._dims

    def constraints(self, params: Mapping[str, Any]) -> bool:
        if params["block_shape"] in self.banned:
            return False
        if params.get("set_launch_bounds") and "max_threads" in params:
            x, y, z = self.parse_shape(params["block_shape"])
            return int(params["max_threads"]) >= x * y * z
        return True

    def derived(self, params: Mapping[str, Any]) -> ExperimentConfiguration:
        block = self.parse_shape(params["block_shape"])
        # Cover the recorded threads on every axis with the new block shape.
        grid = tuple(-(-(g * rb) // b) for g, rb, b in zip(self.recorded_grid, self.recorded_block, block))
        threads = block[0] * block[1] * block[2]
        bounds = bool(params.get("set_launch_bounds", False))
        if "max_threads" in params:
            max_threads = int(params["max_threads"])
        elif self.max_threads_policy == "recorded":
            rb = self.recorded_block
            max_threads = max(rb[0] * rb[1] * rb[2], threads)
        elif self.max_threads_policy == "hardware":
            max_threads = MAX_BLOCK_THREADS
        else:
            max_threads = threads
        return ExperimentConfiguration.from_dict({
            "grid": dict(zip("xyz", grid)),
            "block": dict(zip("xyz", block)),
            "shared_mem": self.shared_mem,
            "passes": params["passes"],
            "codegen_opt": int(params["codegen_opt"]),
            "specialize": bool(params["specialize"]),
            "specialize_dims": bool(params["specialize_dims"]),
            "set_launch_bounds": bounds,
            "max_threads": max_threads if bounds else 1024,
            "min_blocks_per_sm": int(params.get("min_blocks_per_sm", 1)) if bounds else 1,
        })

    def baseline(self) -> ExperimentConfiguration:
        return ExperimentConfiguration.from_dict({
            "grid": dict(zip("xyz", self.recorded_grid)),
            "block": dict(zip("xyz", self.recorded_block)),
            "shared_mem": self.shared_mem,
        })
