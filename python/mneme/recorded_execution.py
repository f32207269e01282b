"""Read a recording database's kernel JSON (db/FORMAT.md, Mneme's keys).

`RecordedExecution.from_json(path)` loads one `<static-hash>.json` and is a
mapping from an instance's dynamic hash to its `KernelInstance`. File names
in the JSON are relative to the JSON's folder and are returned as absolute
paths; a file named there that does not exist is an error.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

from .mneme_types import dim3

__all__ = ["RecordedExecution", "KernelInstance", "RecordingError"]


class RecordingError(ValueError):
    """The recording database is missing, malformed, or names absent files."""


def _need(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in obj or obj[key] is None:
        raise RecordingError(f"{where}: missing {key}")
    value = obj[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise RecordingError(f"{where}.{key}: want {getattr(kind, '__name__', kind)}, got {value!r}")
    return value


def _dims(obj: Mapping[str, Any], key: str, where: str) -> dim3:
    raw = _need(obj, key, dict, where)
    try:
        return dim3.from_dict({axis: raw[axis] for axis in ("x", "y", "z") if axis in raw}, f"{where}.{key}")
    except (TypeError, ValueError) as e:
        raise RecordingError(str(e)) from None


@dataclass
class KernelInstance:
    """One recorded launch of a kernel (one dynamic hash)."""

    dynamic_hash: str
    static_hash: str
    kernel_name: str
    demangled_name: str
    grid_dim: dim3
    block_dim: dim3
    shared_mem: int
    # Each argument's bytes as lowercase hex, as recorded.
    args: list[str]
    # Per argument: whether it is a scalar that can be folded into the code.
    specializations: list[bool]
    # The 0-based indices of the arguments that can be specialized.
    available_specializations: list[int]
    occ: int
    prologue: Path
    epilogue: Path
    modules: list[Path]
    arg_names: list[str] = field(default_factory=list)
    # The instance's JSON object, for keys this class does not name.
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def name(self) -> str:
        return self.kernel_name


# The module-level name, for annotations inside RecordedExecution (where
# KernelInstance means the nested alias class).
_Instance = KernelInstance


class RecordedExecution(Mapping[str, KernelInstance]):
    """The instances of one recorded kernel, keyed by dynamic hash."""

    class KernelInstance(KernelInstance):  # Mneme's scripts annotate with RecordedExecution.KernelInstance
        pass

    def __init__(self, path: Path, doc: Mapping[str, Any], instances: dict[str, _Instance]):
        self.path = path
        self.static_hash: str = doc.get("StaticHash", "")
        self.kernel_name: str = doc.get("KernelName", "")
        self.demangled_name: str = doc.get("DemangledName", "")
        self.arg_names: list[str] = list(doc.get("ArgNames") or [])
        self.document: dict[str, Any] = dict(doc)
        self._instances = instances

    def __getitem__(self, dynamic_hash: str) -> _Instance:
        try:
            return self._instances[dynamic_hash]
        except KeyError:
            known = ", ".join(sorted(self._instances)) or "none"
            raise KeyError(f"{self.path}: no instance {dynamic_hash!r} (recorded: {known})") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._instances)

    def __len__(self) -> int:
        return len(self._instances)

    def __repr__(self) -> str:
        return f"RecordedExecution({str(self.path)!r}, kernel={self.kernel_name!r}, instances={len(self)})"

    @classmethod
    def from_json(cls, path: str | os.PathLike[str]) -> "RecordedExecution":
        """Loads a kernel's JSON file; raises RecordingError naming the file and field."""
        json_path = Path(path).resolve()
        if not json_path.is_file():
            raise RecordingError(f"{json_path}: recording database file not found")
        try:
            doc = json.loads(json_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise RecordingError(f"{json_path}: not valid JSON: {e}") from None
        if not isinstance(doc, dict):
            raise RecordingError(f"{json_path}: want a JSON object at the top level")
        where = json_path.name
        folder = json_path.parent

        def resolve(name: str, field_name: str) -> Path:
            p = Path(name)
            full = p if p.is_absolute() else folder / p
            if not full.is_file():
                raise RecordingError(f"{where}: {field_name}: file {full} does not exist")
            return full

        static_hash = _need(doc, "StaticHash", str, where)
        kernel_name = _need(doc, "KernelName", str, where)
        demangled = doc.get("DemangledName") or kernel_name
        modules = [resolve(m, f"Modules[{i}]") for i, m in enumerate(_need(doc, "Modules", list, where))]
        specializations = [bool(s) for s in (doc.get("Specializations") or [])]
        arg_names = [str(n) for n in (doc.get("ArgNames") or [])]
        raw_instances = _need(doc, "instances", dict, where)
        instances: dict[str, _Instance] = {}
        for dh, inst in raw_instances.items():
            iw = f"{where}: instances[{dh}]"
            if not isinstance(inst, dict):
                raise RecordingError(f"{iw}: want an object")
            args = _need(inst, "Args", list, iw)
            instances[dh] = RecordedExecution.KernelInstance(
                dynamic_hash=dh,
                static_hash=static_hash,
                kernel_name=kernel_name,
                demangled_name=demangled,
                grid_dim=_dims(inst, "GridDims", iw),
                block_dim=_dims(inst, "BlockDims", iw),
                shared_mem=int(inst.get("SharedMem") or 0),
                args=[str(a) for a in args],
                specializations=list(specializations),
                available_specializations=[i for i, s in enumerate(specializations) if s],
                occ=int(inst.get("Occurrences") or 1),
                prologue=resolve(_need(inst, "Prologue", str, iw), f"instances[{dh}].Prologue"),
                epilogue=resolve(_need(inst, "Epilogue", str, iw), f"instances[{dh}].Epilogue"),
                modules=modules,
                arg_names=arg_names,
                raw=inst,
            )
        return cls(json_path, doc, instances)
