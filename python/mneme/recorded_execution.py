"""Read a recording database's kernel JSON (db/FORMAT.md, Mneme's keys).

`RecordedExecution.from_json(path)` loads one `<static-hash>.json` and is a
mapping from an instance's dynamic hash to its `KernelInstance`. File names
in the JSON are relative to the JSON's folder and are returned as absolute
paths; a file named there that does not exist is an error.

A recording is read as untrusted, with the Go reader's bounds: the kernel
file must be a regular file (a FIFO or a device is refused, never waited on)
of at most 256 MiB, checked before it is read; JSON nested too deeply, keys
given twice, text that is not UTF-8 and numbers out of range are refused;
snapshot and module names are plain file names inside the JSON's folder
(no `/`, no `..`, no link leading out of it). Every refusal is a
`RecordingError` naming the file and the field.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

from .mneme_types import dim3

__all__ = ["RecordedExecution", "KernelInstance", "RecordingError"]


class RecordingError(ValueError):
    """The recording database is missing, malformed, or names absent files."""


# The Go reader's bound on a kernel file (internal/safefile.MaxJSON).
MAX_KERNEL_FILE = 256 << 20
# The largest value of a 32-bit unsigned field.
_U32 = (1 << 32) - 1


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _need(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in obj or obj[key] is None:
        raise RecordingError(f"{where}: missing {key}")
    value = obj[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise RecordingError(f"{where}.{key}: want {getattr(kind, '__name__', kind)}, got {_short(value)}")
    return value


def _count(obj: Mapping[str, Any], key: str, where: str, default: int, low: int) -> int:
    """An integer field within low..2^32-1; absent or null gives default."""
    value = obj.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= _U32:
        raise RecordingError(f"{where}.{key}: want an integer in {low}..{_U32}, got {_short(value)}")
    return value


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise RecordingError(f"key {k!r} appears twice")
        out[k] = v
    return out


def _read_kernel_file(path: Path) -> Any:
    """The kernel file's JSON, read as the Go reader reads it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise RecordingError(f"{path}: recording database file not found") from None
    except OSError as e:
        raise RecordingError(f"{path}: {e.strerror or e}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise RecordingError(f"{path}: not a regular file")
        if st.st_size > MAX_KERNEL_FILE:
            raise RecordingError(f"{path}: {st.st_size} bytes, more than the {MAX_KERNEL_FILE} a kernel file may have")
        data = f.read(MAX_KERNEL_FILE + 1)
    if len(data) > MAX_KERNEL_FILE:
        raise RecordingError(f"{path}: more than the {MAX_KERNEL_FILE} bytes a kernel file may have")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RecordingError(f"{path}: not UTF-8 text at byte {e.start}") from None
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates)
    except RecordingError as e:
        raise RecordingError(f"{path}: {e}") from None
    except (ValueError, RecursionError, OverflowError) as e:
        raise RecordingError(f"{path}: not valid JSON: {e}") from None


def _dims(obj: Mapping[str, Any], key: str, where: str) -> dim3:
    raw = _need(obj, key, dict, where)
    for axis in ("x", "y", "z"):
        v = raw.get(axis, 1)
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= _U32:
            raise RecordingError(f"{where}.{key}.{axis}: want an integer in 1..{_U32}, got {_short(v)}")
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
        try:
            json_path = Path(path).resolve()
        except (OSError, RuntimeError, ValueError) as e:
            raise RecordingError(f"{path}: {e}") from None
        doc = _read_kernel_file(json_path)
        if not isinstance(doc, dict):
            raise RecordingError(f"{json_path}: want a JSON object at the top level")
        where = json_path.name
        folder = json_path.parent

        def resolve(name: Any, field_name: str) -> Path:
            # A plain file name of the JSON's folder, as the Go reader wants:
            # never a path, never a link that leads out of the folder.
            if (not isinstance(name, str) or not name or name in (".", "..") or name.startswith(".")
                    or any(c in name for c in "/\\\x00")):
                raise RecordingError(f"{where}: {field_name}: {_short(name)}: want a file name inside the database folder")
            full = folder / name
            try:
                real = full.resolve()
            except (OSError, RuntimeError) as e:
                raise RecordingError(f"{where}: {field_name}: {full}: {e}") from None
            if real.parent != folder.resolve():
                raise RecordingError(f"{where}: {field_name}: {full} is a link that leads out of the database folder")
            if not real.is_file():
                raise RecordingError(f"{where}: {field_name}: file {full} does not exist")
            return full

        static_hash = _need(doc, "StaticHash", str, where)
        kernel_name = _need(doc, "KernelName", str, where)
        demangled = doc.get("DemangledName") or kernel_name
        if not isinstance(demangled, str):
            raise RecordingError(f"{where}.DemangledName: want str, got {_short(demangled)}")
        modules = [resolve(m, f"Modules[{i}]") for i, m in enumerate(_need(doc, "Modules", list, where))]
        raw_spec = doc.get("Specializations") or []
        if not isinstance(raw_spec, list) or not all(isinstance(v, bool) for v in raw_spec):
            raise RecordingError(f"{where}.Specializations: want a list of true/false, got {_short(raw_spec)}")
        specializations = list(raw_spec)
        raw_names = doc.get("ArgNames") or []
        if not isinstance(raw_names, list) or not all(isinstance(v, str) for v in raw_names):
            raise RecordingError(f"{where}.ArgNames: want a list of names, got {_short(raw_names)}")
        arg_names = list(raw_names)
        raw_instances = _need(doc, "instances", dict, where)
        instances: dict[str, _Instance] = {}
        for dh, inst in raw_instances.items():
            iw = f"{where}: instances[{dh}]"
            if not isinstance(inst, dict):
                raise RecordingError(f"{iw}: want an object")
            args = _need(inst, "Args", list, iw)
            if not all(isinstance(a, str) for a in args):
                raise RecordingError(f"{iw}.Args: want hex strings, got {_short(args)}")
            instances[dh] = RecordedExecution.KernelInstance(
                dynamic_hash=dh,
                static_hash=static_hash,
                kernel_name=kernel_name,
                demangled_name=demangled,
                grid_dim=_dims(inst, "GridDims", iw),
                block_dim=_dims(inst, "BlockDims", iw),
                shared_mem=_count(inst, "SharedMem", iw, 0, 0),
                args=[str(a) for a in args],
                specializations=list(specializations),
                available_specializations=[i for i, s in enumerate(specializations) if s],
                occ=_count(inst, "Occurrences", iw, 1, 1),
                prologue=resolve(_need(inst, "Prologue", str, iw), f"instances[{dh}].Prologue"),
                epilogue=resolve(_need(inst, "Epilogue", str, iw), f"instances[{dh}].Epilogue"),
                modules=modules,
                arg_names=arg_names,
                raw=inst,
            )
        return cls(json_path, doc, instances)
