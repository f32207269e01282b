"""Read recorded kernel IR from Python, llvmlite-style.

`parse_bitcode(data)` returns a `ModuleRef` whose `functions`, `blocks` and
`instructions` carry opcode, name and type strings, so a search space can
compute IR features (instruction mix, loop count, ...). It is backed by
llvmlite, whose release 0.50 bundles LLVM 22, the LLVM mneme records with;
older llvmlite releases cannot read LLVM 22 bitcode, which is refused with a
clear error instead of a confusing parse failure.
"""

from __future__ import annotations

import os
from typing import Any, Iterator

__all__ = ["parse_bitcode", "parse_bitcode_file", "ModuleRef", "FunctionRef", "BlockRef", "InstructionRef", "IRUnavailableError"]

# The LLVM major version the recorded bitcode is written with.
REQUIRED_LLVM_MAJOR = 22


class IRUnavailableError(ImportError):
    """No IR reader that understands LLVM 22 bitcode is installed."""


def _binding() -> Any:
    try:
        import llvmlite.binding as binding
    except ImportError as e:
        raise IRUnavailableError(
            "mneme.llvm needs llvmlite >= 0.50 (LLVM 22): pip install 'llvmlite>=0.50' "
            "(or install the package with the [ir] extra)"
        ) from e
    major = binding.llvm_version_info[0]
    if major < REQUIRED_LLVM_MAJOR:
        raise IRUnavailableError(
            f"llvmlite is built on LLVM {major}, which cannot read LLVM {REQUIRED_LLVM_MAJOR} bitcode: "
            "pip install 'llvmlite>=0.50'"
        )
    return binding


class InstructionRef:
    """One instruction: `opcode` ("add", "load", "call", ...), `name`, `type`."""

    def __init__(self, ref: Any):
        self._ref = ref

    @property
    def opcode(self) -> str:
        return str(self._ref.opcode)

    @property
    def name(self) -> str:
        return str(self._ref.name)

    @property
    def type(self) -> str:
        return str(self._ref.type)

    @property
    def operands(self) -> list[str]:
        """Each operand printed as IR text."""
        return [str(op) for op in self._ref.operands]

    def __str__(self) -> str:
        return str(self._ref).strip()

    def __repr__(self) -> str:
        return f"InstructionRef({str(self)!r})"


class BlockRef:
    """One basic block."""

    def __init__(self, ref: Any):
        self._ref = ref

    @property
    def name(self) -> str:
        return str(self._ref.name)

    @property
    def instructions(self) -> Iterator[InstructionRef]:
        return (InstructionRef(i) for i in self._ref.instructions)

    def __repr__(self) -> str:
        return f"BlockRef(name={self.name!r})"


class FunctionRef:
    """One function, a definition or a declaration."""

    def __init__(self, ref: Any):
        self._ref = ref

    @property
    def name(self) -> str:
        return str(self._ref.name)

    @property
    def type(self) -> str:
        return str(self._ref.type)

    @property
    def is_declaration(self) -> bool:
        return bool(self._ref.is_declaration)

    @property
    def linkage(self) -> str:
        return str(self._ref.linkage).split(".")[-1]

    @property
    def arguments(self) -> list[str]:
        """Each parameter printed as IR text (type and name)."""
        return [str(a) for a in self._ref.arguments]

    @property
    def blocks(self) -> Iterator[BlockRef]:
        return (BlockRef(b) for b in self._ref.blocks)

    @property
    def instructions(self) -> Iterator[InstructionRef]:
        """Every instruction of every block, in order."""
        for b in self.blocks:
            yield from b.instructions

    def __str__(self) -> str:
        return str(self._ref)

    def __repr__(self) -> str:
        return f"FunctionRef(name={self.name!r})"


class ModuleRef:
    """A parsed IR module."""

    def __init__(self, ref: Any):
        self._ref = ref

    @property
    def name(self) -> str:
        return str(self._ref.name)

    @property
    def triple(self) -> str:
        return str(self._ref.triple)

    @property
    def functions(self) -> Iterator[FunctionRef]:
        return (FunctionRef(f) for f in self._ref.functions)

    def get_function(self, name: str) -> FunctionRef:
        """The function called `name`; NameError when there is none."""
        try:
            return FunctionRef(self._ref.get_function(name))
        except NameError:
            raise NameError(f"no function named {name!r} in the module") from None

    def __str__(self) -> str:
        return str(self._ref)


def parse_bitcode(data: bytes) -> ModuleRef:
    """Parses LLVM bitcode bytes (a recorded `RecordedIR_<sh>.bc`)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"parse_bitcode: want bytes, got {type(data).__name__}")
    binding = _binding()
    try:
        return ModuleRef(binding.parse_bitcode(bytes(data)))
    except RuntimeError as e:
        raise ValueError(f"parse_bitcode: not readable LLVM bitcode: {e}") from None


def parse_bitcode_file(path: str | os.PathLike[str]) -> ModuleRef:
    """Reads and parses a bitcode file."""
    with open(path, "rb") as f:
        return parse_bitcode(f.read())
