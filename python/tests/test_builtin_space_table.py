"""Every row of the tune CLI's built-in space tables: presets, launch safety, launch axes, switch modes, max-threads policies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mneme.cli.builtin_space import (
    ALL_PIPELINES,
    BOOL_MODES,
    LAUNCH_DIMS,
    MAX_THREADS_POLICIES,
    PRESET_DEFAULTS,
    SAFETIES,
    BuiltinSpace,
    default_safety,
)
from mneme.mneme_types import dim3
from mneme.recorded_execution import KernelInstance


def _kernel(block: tuple[int, int, int] = (256, 1, 1), grid: tuple[int, int, int] = (16, 1, 1)) -> KernelInstance:
    return KernelInstance(dynamic_hash="d", static_hash="s", kernel_name="_Z1kPfi", demangled_name="k(float*, int)",
                          grid_dim=dim3(*grid), block_dim=dim3(*block), shared_mem=0, args=["00" * 8, "01000000"],
                          specializations=[False, True], available_specializations=[1], occ=1,
                          prologue=Path("p"), epilogue=Path("e"), modules=[])


def _values(space: BuiltinSpace, name: str) -> list[Any]:
    return list(space.dimensions()[name].values())


# Per preset: launch axes, pipelines, codegen levels, specialize,
# specialize_dims, launch bounds, launch safety (Mneme's choices).
PRESETS = {
    "quick": ("auto", ["default<O2>", "default<O3>"], [3], [False], [False], [False], "conservative"),
    "standard": ("auto", ["default<O1>", "default<O2>", "default<O3>"], [2, 3], [False, True], [False], [False], "balanced"),
    "launch": ("auto", ["default<O3>"], [3], [False], [False], [False], "balanced"),
    "compiler": ("none", ALL_PIPELINES, [0, 1, 2, 3], [False, True], [False], [False], "balanced"),
    "full": ("auto", ALL_PIPELINES, [0, 1, 2, 3], [False, True], [False, True], [False, True], "aggressive"),
}


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_preset_every_row(preset: str) -> None:
    axes, passes, cg, spec, dims, bounds, safety = PRESETS[preset]
    d = PRESET_DEFAULTS[preset]
    assert (d.launch_dim, d.safety) == (axes, safety)
    assert default_safety(preset) == safety
    space = BuiltinSpace(_kernel(), preset=preset)
    assert space.safety == safety
    assert _values(space, "passes") == passes
    assert _values(space, "codegen_opt") == cg
    assert _values(space, "specialize") == spec
    assert _values(space, "specialize_dims") == dims
    assert _values(space, "set_launch_bounds") == bounds
    shapes = _values(space, "block_shape")
    if axes == "none":
        assert shapes == ["256x1x1"]
    else:
        assert len(shapes) > 1 and "256x1x1" in shapes


def test_presets_are_the_go_presets() -> None:
    assert set(PRESETS) == set(PRESET_DEFAULTS) == {"quick", "standard", "launch", "compiler", "full"}


# Per safety, the x values of a 1-D launch recorded with 256 threads.
SAFETY_X = {
    "conservative": [128, 256, 512],
    "balanced": [32, 64, 128, 256, 512, 1024],
    "aggressive": list(range(32, 1025, 32)),
}


@pytest.mark.parametrize("safety", SAFETIES)
def test_launch_safety_every_row(safety: str) -> None:
    space = BuiltinSpace(_kernel(), preset="launch", launch_safety=safety)
    assert [BuiltinSpace.parse_shape(s)[0] for s in _values(space, "block_shape")] == SAFETY_X[safety]


def test_launch_safety_whole_warps_except_aggressive() -> None:
    # A 2-D launch: balanced and conservative keep whole warps (the recorded
    # shape excepted); aggressive takes any shape within the limit.
    for safety in SAFETIES:
        space = BuiltinSpace(_kernel(block=(8, 3, 1)), preset="launch", launch_dim="xy", launch_safety=safety)
        shapes = [BuiltinSpace.parse_shape(s) for s in _values(space, "block_shape")]
        partial = [s for s in shapes if (s[0] * s[1] * s[2]) % 32]
        assert (8, 3, 1) in shapes
        if safety == "aggressive":
            assert any(s != (8, 3, 1) for s in partial)
        else:
            assert partial == [(8, 3, 1)]
        assert all(s[0] * s[1] * s[2] <= 1024 for s in shapes)


@pytest.mark.parametrize("launch_dim", LAUNCH_DIMS)
def test_launch_dim_every_row(launch_dim: str) -> None:
    # Recorded block 64x4x2: each row varies exactly its axes ("auto": the
    # axes the launch uses, all three here).
    space = BuiltinSpace(_kernel(block=(64, 4, 2), grid=(4, 4, 4)), preset="full", launch_dim=launch_dim)
    shapes = [BuiltinSpace.parse_shape(s) for s in _values(space, "block_shape")]
    varied = "".join(a for i, a in enumerate("xyz") if len({s[i] for s in shapes}) > 1)
    want = {"none": "", "auto": "xyz", "x": "x", "xy": "xy", "xyz": "xyz"}[launch_dim]
    assert varied == want
    # Every shape covers the recorded threads on every axis.
    for params in ({"block_shape": f"{x}x{y}x{z}", "passes": "default<O3>", "codegen_opt": 3, "specialize": False,
                    "specialize_dims": False} for x, y, z in shapes[:20]):
        c = space.derived(params)
        for axis, rec in zip("xyz", ((4, 64), (4, 4), (4, 2))):
            assert getattr(c.grid, axis) * getattr(c.block, axis) >= rec[0] * rec[1]


def test_launch_dim_auto_uses_the_axes_the_launch_uses() -> None:
    for block, want in (((256, 1, 1), "x"), ((16, 16, 1), "xy"), ((1, 1, 1), "x"), ((1, 8, 1), "y")):
        space = BuiltinSpace(_kernel(block=block), preset="launch", launch_safety="balanced")
        assert space.axes == want, block


@pytest.mark.parametrize("mode", BOOL_MODES)
def test_switch_modes_every_row(mode: str) -> None:
    want = {"fixed": [False], "on": [True], "off": [False], "on-off": [False, True]}[mode]
    space = BuiltinSpace(_kernel(), preset="full", specialize=mode, specialize_dims=mode, launch_bounds=mode)
    for name in ("specialize", "specialize_dims", "set_launch_bounds"):
        assert _values(space, name) == want, name


@pytest.mark.parametrize("policy", MAX_THREADS_POLICIES)
def test_max_threads_policy_every_row(policy: str) -> None:
    space = BuiltinSpace(_kernel(), preset="full", launch_bounds="on", max_threads_policy=policy, launch_dim="none")
    params = {"block_shape": "256x1x1", "passes": "default<O3>", "codegen_opt": 3, "specialize": False,
              "specialize_dims": False, "set_launch_bounds": True}
    if policy == "powers-of-two":
        assert _values(space, "max_threads") == [32, 64, 128, 256, 512, 1024]
        params["max_threads"] = 512
    else:
        assert "max_threads" not in space.dimensions()
    want = {"recorded": 256, "block-threads": 256, "powers-of-two": 512, "hardware": 1024}[policy]
    assert space.derived(params).max_threads == want
    # Without launch bounds the policy does not matter: Mneme's default stays.
    params["set_launch_bounds"] = False
    assert space.derived(params).max_threads == 1024


def test_max_threads_recorded_policy_covers_a_larger_block() -> None:
    space = BuiltinSpace(_kernel(), preset="full", launch_bounds="on", max_threads_policy="recorded")
    params = {"block_shape": "512x1x1", "passes": "default<O3>", "codegen_opt": 3, "specialize": False,
              "specialize_dims": False, "set_launch_bounds": True}
    assert space.derived(params).max_threads == 512
    params["block_shape"] = "128x1x1"
    assert space.derived(params).max_threads == 256
