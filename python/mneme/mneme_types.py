"""Replay configurations and results, with Mneme's field names.

`ExperimentConfiguration` is what a worker compiles and runs; its JSON form is
the `config` object of the worker protocol (tune/PROTOCOL.md) and its `hash()`
identifies a configuration across runs and processes. `ExperimentResult` is
what one replay produced.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
import math
import numbers
import warnings
from typing import Any, Mapping, Union

from . import vocabulary as _vocabulary

__all__ = ["dim3", "ExperimentConfiguration", "ExperimentResult", "STATUSES"]

# Trial statuses, the Go engine's (mneme.vocabulary): the first seven come
# from workers, "timeout" and "crashed" are assigned by the client (the
# executor) when a worker does not answer in time or dies.
STATUSES = _vocabulary.STATUSES


def _check_int(owner: str, name: str, value: Any, minimum: int | None = None) -> int:
    """An integer, as Mneme's classes take one: any integral number (a numpy
    integer, 2.0) is coerced; a bool or a fraction is a mistake."""
    # bool is an int subclass; True as a thread count is a mistake, not a 1.
    if isinstance(value, bool):
        raise TypeError(f"{owner}.{name}: want an integer, got {value!r}")
    n: int
    if isinstance(value, numbers.Integral):
        n = int(value)
    elif isinstance(value, numbers.Real) and math.isfinite(float(value)) and float(value).is_integer():
        n = int(float(value))
    else:
        raise TypeError(f"{owner}.{name}: want an integer, got {value!r}")
    if minimum is not None and n < minimum:
        raise ValueError(f"{owner}.{name}: {n} is below the minimum {minimum}")
    return n


def _check_bool(owner: str, name: str, value: Any) -> bool:
    """True or false; a numpy bool or the integers 0 and 1 are coerced."""
    if isinstance(value, bool):
        return value
    if type(value).__name__ == "bool_" or (isinstance(value, numbers.Integral) and int(value) in (0, 1)):
        return bool(value)
    raise TypeError(f"{owner}.{name}: want true or false, got {value!r}")


@dataclass
class dim3:  # noqa: N801 - the CUDA type's name, as Mneme spells it
    """A CUDA grid or block shape."""

    x: int = 1
    y: int = 1
    z: int = 1

    def __post_init__(self) -> None:
        for axis in ("x", "y", "z"):
            setattr(self, axis, _check_int("dim3", axis, getattr(self, axis), minimum=1))

    def count(self) -> int:
        """Number of threads (or blocks) the shape describes."""
        return self.x * self.y * self.z

    def to_dict(self) -> dict[str, int]:
        return {"x": self.x, "y": self.y, "z": self.z}

    @classmethod
    def from_dict(cls, d: Union["dim3", Mapping[str, Any]], field_name: str = "dim3") -> "dim3":
        """Reads `{"x":..,"y":..,"z":..}`; missing y and z are 1."""
        if isinstance(d, dim3):
            return dim3(d.x, d.y, d.z)
        if not isinstance(d, Mapping):
            raise TypeError(f"{field_name}: want a dim3 or a mapping with x, y, z; got {d!r}")
        unknown = set(d) - {"x", "y", "z"}
        if unknown:
            raise ValueError(f"{field_name}: unknown keys {sorted(unknown)} (want x, y, z)")
        if "x" not in d:
            raise ValueError(f"{field_name}: missing x")
        try:
            return cls(d["x"], d.get("y", 1), d.get("z", 1))
        except (TypeError, ValueError) as e:
            raise type(e)(str(e).replace("dim3.", f"{field_name}.")) from None


# Keys of our engine's configuration beyond Mneme's; they are written only
# when set, so a configuration that does not use them keeps Mneme's hash.
_EXTENSION_DEFAULTS: dict[str, Any] = {
    "specialize_args": [],
    "ptxas_opt": 0,
    "max_registers": 0,
    "original": False,
    "fp_contract": "",
    "arch": "",
    "ptx_version": 0,
}

# Mneme's published examples still pass this field, which it later dropped;
# code generation here is always serial.
_IGNORED_KEYS = frozenset({"codegen_method"})

FP_CONTRACT = ("", "fast", "on", "off")


def _warn_ignored(what: str) -> None:
    warnings.warn(f"ExperimentConfiguration: {what}", stacklevel=4)


@dataclass
class ExperimentConfiguration:
    """One replay configuration: launch geometry plus compile settings.

    Fields and defaults are Mneme's; `specialize_args`, `ptxas_opt`,
    `max_registers`, `arch` and `ptx_version` are this engine's extras (see
    config.go at the repository root).
    """

    grid: dim3
    block: dim3
    shared_mem: int = 0
    specialize: bool = False
    set_launch_bounds: bool = False
    max_threads: int = 1024
    min_blocks_per_sm: int = 1
    specialize_dims: bool = False
    passes: str = "default<O3>"
    codegen_opt: int = 3
    prune: bool = True
    internalize: bool = True
    # Extensions: 0-based indices of the scalars to fold (empty: all of them
    # when `specialize` is on), ptxas -O level 1..4 (0: the driver's default),
    # register cap (0: none), target such as "sm_90" ("" : the device's).
    specialize_args: list[int] = field(default_factory=list)
    ptxas_opt: int = 0
    max_registers: int = 0
    # original runs the application's own device code (the true baseline);
    # fp_contract is "fast", "on" or "off" ("": as the application compiled).
    original: bool = False
    fp_contract: str = ""
    arch: str = ""
    ptx_version: int = 0
    # Mneme's dropped field: it reads "serial", the only code generation
    # here; another value is accepted and ignored (with a warning).
    codegen_method: dataclasses.InitVar[str] = "serial"

    def __post_init__(self, codegen_method: Any = "serial") -> None:
        owner = "ExperimentConfiguration"
        if codegen_method != "serial":
            _warn_ignored(f"codegen_method={codegen_method!r} is ignored: code generation is serial")
        self.grid = dim3.from_dict(self.grid, "grid")
        self.block = dim3.from_dict(self.block, "block")
        self.shared_mem = _check_int(owner, "shared_mem", self.shared_mem, minimum=0)
        for name in ("specialize", "set_launch_bounds", "specialize_dims", "prune", "internalize", "original"):
            setattr(self, name, _check_bool(owner, name, getattr(self, name)))
        if not self.set_launch_bounds:
            # Unused without launch bounds, so Mneme never looks at them: a
            # fraction there (a block size scaled by a factor) is accepted.
            for name, default in (("max_threads", 1024), ("min_blocks_per_sm", 1)):
                value = getattr(self, name)
                if isinstance(value, numbers.Real) and not isinstance(value, bool) and not float(value).is_integer():
                    _warn_ignored(f"{name}={value!r} is ignored without launch bounds; {default} is kept")
                    setattr(self, name, default)
        self.max_threads = _check_int(owner, "max_threads", self.max_threads, minimum=0)
        self.min_blocks_per_sm = _check_int(owner, "min_blocks_per_sm", self.min_blocks_per_sm, minimum=0)
        if not isinstance(self.passes, str):
            raise TypeError(f"{owner}.passes: want a pipeline string, got {self.passes!r}")
        self.codegen_opt = _check_int(owner, "codegen_opt", self.codegen_opt)
        if not 0 <= self.codegen_opt <= 3:
            raise ValueError(f"{owner}.codegen_opt: {self.codegen_opt} is not in 0..3")
        if not isinstance(self.specialize_args, list):
            raise TypeError(f"{owner}.specialize_args: want a list of argument indices, got {self.specialize_args!r}")
        self.specialize_args = [_check_int(owner, "specialize_args", i, minimum=0) for i in self.specialize_args]
        self.ptxas_opt = _check_int(owner, "ptxas_opt", self.ptxas_opt)
        if not 0 <= self.ptxas_opt <= 4:
            raise ValueError(f"{owner}.ptxas_opt: {self.ptxas_opt} is not in 0..4")
        self.max_registers = _check_int(owner, "max_registers", self.max_registers)
        if not 0 <= self.max_registers <= 255:
            raise ValueError(f"{owner}.max_registers: {self.max_registers} is not in 0..255")
        if self.fp_contract not in FP_CONTRACT:
            raise ValueError(f"{owner}.fp_contract: {self.fp_contract!r} is not one of fast, on, off or empty")
        if not isinstance(self.arch, str):
            raise TypeError(f"{owner}.arch: want a string such as 'sm_90', got {self.arch!r}")
        self.ptx_version = _check_int(owner, "ptx_version", self.ptx_version, minimum=0)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form, Mneme's keys in Mneme's order, extensions when set."""
        d: dict[str, Any] = {
            "grid": self.grid.to_dict(),
            "block": self.block.to_dict(),
            "shared_mem": self.shared_mem,
            "specialize": self.specialize,
            "set_launch_bounds": self.set_launch_bounds,
            "max_threads": self.max_threads,
            "min_blocks_per_sm": self.min_blocks_per_sm,
            "specialize_dims": self.specialize_dims,
            "passes": self.passes,
            "codegen_opt": self.codegen_opt,
            "prune": self.prune,
            "internalize": self.internalize,
        }
        for key, default in _EXTENSION_DEFAULTS.items():
            value = getattr(self, key)
            if value != default:
                d[key] = list(value) if isinstance(value, list) else value
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ExperimentConfiguration":
        """Builds a configuration; `grid` and `block` are required, unknown keys raise."""
        if not isinstance(d, Mapping):
            raise TypeError(f"ExperimentConfiguration: want a mapping, got {type(d).__name__}")
        for required in ("grid", "block"):
            if required not in d:
                raise ValueError(f"ExperimentConfiguration: missing required field {required!r}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known - _IGNORED_KEYS
        if unknown:
            raise ValueError(f"ExperimentConfiguration: unknown fields {sorted(unknown)}")
        kwargs = {k: v for k, v in d.items() if k in known or k in _IGNORED_KEYS}
        if "specialize_args" in kwargs and kwargs["specialize_args"] is not None:
            kwargs["specialize_args"] = list(kwargs["specialize_args"])
        elif "specialize_args" in kwargs:
            kwargs["specialize_args"] = []
        return cls(**kwargs)

    def threads_per_block(self) -> int:
        return self.block.count()

    def is_valid(self) -> bool:
        """False exactly when launch bounds are on and allow fewer threads than a block has."""
        return not (self.set_launch_bounds and self.max_threads < self.block.count())

    def ground(self) -> "ExperimentConfiguration":
        """Zeroes the launch-bound fields when launch bounds are off, so that
        configurations differing only in ignored fields hash alike. Changes the
        configuration in place and returns it."""
        if not self.set_launch_bounds:
            self.max_threads = 0
            self.min_blocks_per_sm = 0
        return self

    def hash(self) -> str:
        """sha256 hex digest of the JSON form with sorted keys and compact separators."""
        text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        import hashlib  # only hashing needs it; the proposer starts faster without

        return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class ExperimentResult:
    """What one replay of one configuration produced.

    Times: `preprocess_ir_time`, `opt_time`, `codegen_time` in seconds;
    `exec_time` in nanoseconds, one sample per launch (warmup samples first
    when the worker reports them, then the timed ones). Any figure the worker
    returns beyond these fields (spills, ptxas time, verification detail, ...)
    is kept in `extra` and readable as an attribute.
    """

    preprocess_ir_time: float = 0.0
    opt_time: float = 0.0
    codegen_time: float = 0.0
    obj_size: int = 0
    exec_time: list[float] = field(default_factory=list)
    verified: bool = False
    executed: bool = False
    failed: bool = False
    start_time: str = ""
    end_time: str = ""
    gpu_id: int = -1
    const_mem_usage: int = 0
    local_mem_usage: int = 0
    reg_usage: int = 0
    error: str = ""
    status: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        # Only called when normal lookup fails: expose the worker's extra figures.
        extra = self.__dict__.get("extra")
        if extra is not None and name in extra:
            return extra[name]
        raise AttributeError(f"ExperimentResult has no field {name!r}")

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        d["exec_time"] = list(self.exec_time)
        for key, value in self.extra.items():
            d.setdefault(key, value)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ExperimentResult":
        """Reads a result; keys that are not fields go to `extra`."""
        if not isinstance(d, Mapping):
            raise TypeError(f"ExperimentResult: want a mapping, got {type(d).__name__}")
        names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        kwargs: dict[str, Any] = {}
        extra: dict[str, Any] = dict(d.get("extra") or {})
        for key, value in d.items():
            if key == "extra":
                continue
            if key in names:
                kwargs[key] = value
            else:
                extra[key] = value
        if kwargs.get("exec_time") is None:
            kwargs["exec_time"] = []
        elif not isinstance(kwargs["exec_time"], list):
            raise TypeError(f"ExperimentResult.exec_time: want a list of nanoseconds, got {kwargs['exec_time']!r}")
        for key in ("error", "status", "start_time", "end_time"):
            if kwargs.get(key) is None:
                kwargs.pop(key, None)
        result = cls(**kwargs)
        result.extra = extra
        return result

    @classmethod
    def failure(cls, status: str, error: str, gpu_id: int = -1) -> "ExperimentResult":
        """A result for a trial the client had to end (timeout, crash)."""
        return cls(failed=True, status=status, error=error, gpu_id=gpu_id)
