"""ExperimentConfiguration.hash changes with each field alone, and keeps with equal configurations."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from mneme.mneme_types import ExperimentConfiguration, dim3

# A configuration whose every field differs from its default, and one at the
# defaults: each field is changed alone away from both.
SET: dict[str, Any] = {
    "grid": {"x": 64, "y": 2, "z": 3},
    "block": {"x": 128, "y": 2, "z": 1},
    "shared_mem": 256,
    "specialize": True,
    "set_launch_bounds": True,
    "max_threads": 256,
    "min_blocks_per_sm": 2,
    "specialize_dims": True,
    "passes": "default<O2>",
    "codegen_opt": 2,
    "prune": False,
    "internalize": False,
    "specialize_args": [1, 2],
    "ptxas_opt": 3,
    "max_registers": 64,
    "original": True,
    "fp_contract": "fast",
    "arch": "sm_90",
    "ptx_version": 80,
}
DEFAULTS: dict[str, Any] = {"grid": {"x": 64, "y": 2, "z": 3}, "block": {"x": 128, "y": 2, "z": 1}}


def _other(key: str, value: Any) -> list[Any]:
    """Other values of a field, each a valid configuration."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [value + 1] if key != "codegen_opt" else [(value + 1) % 4]
    if key == "fp_contract":  # one of a few words
        return [w for w in ("fast", "on", "off", "") if w != value][:2]
    if isinstance(value, str):
        return [value + "x"]
    if isinstance(value, list):
        return [value + [5], value[:-1]] if value else [[5]]
    if isinstance(value, dict):  # a dim3: each member alone
        return [{**value, m: value[m] + 1} for m in ("x", "y", "z")]
    raise AssertionError(f"{key}: no other value for {value!r}")


@pytest.mark.parametrize("base", [SET, DEFAULTS], ids=["fields set", "defaults"])
def test_hash_changes_with_each_field_alone(base: dict[str, Any]) -> None:
    config = ExperimentConfiguration.from_dict(base)
    seen = {config.hash(): "base"}
    for f in dataclasses.fields(ExperimentConfiguration):
        value = getattr(config, f.name)
        if isinstance(value, dim3):
            value = value.to_dict()
        for other in _other(f.name, value):
            changed = ExperimentConfiguration.from_dict({**base, f.name: other})
            h = changed.hash()
            assert h not in seen, f"changing {f.name} to {other!r} gives the hash of {seen[h]}"
            seen[h] = f"{f.name}={other!r}"


@pytest.mark.parametrize("base", [SET, DEFAULTS], ids=["fields set", "defaults"])
def test_hash_keeps_with_equal_configurations(base: dict[str, Any]) -> None:
    a = ExperimentConfiguration.from_dict(base)
    b = ExperimentConfiguration.from_dict(dict(reversed(list(base.items()))))
    assert a.hash() == b.hash()
    assert ExperimentConfiguration.from_dict(a.to_dict()).hash() == a.hash()
    # An extension at its default is the configuration without it.
    assert ExperimentConfiguration.from_dict({**DEFAULTS, "max_registers": 0, "arch": ""}).hash() == (
        ExperimentConfiguration.from_dict(DEFAULTS).hash()
    )


def test_ground_zeroes_launch_bounds_only_when_off() -> None:
    off = {**DEFAULTS, "set_launch_bounds": False}
    a = ExperimentConfiguration.from_dict({**off, "max_threads": 128, "min_blocks_per_sm": 4}).ground()
    b = ExperimentConfiguration.from_dict({**off, "max_threads": 256, "min_blocks_per_sm": 2}).ground()
    assert a.hash() == b.hash()
    on = {**DEFAULTS, "set_launch_bounds": True}
    for key, value in (("max_threads", 512), ("min_blocks_per_sm", 3)):
        c = ExperimentConfiguration.from_dict(on).ground()
        d = ExperimentConfiguration.from_dict({**on, key: value}).ground()
        assert c.hash() != d.hash(), f"{key} with launch bounds on must change the grounded hash"
