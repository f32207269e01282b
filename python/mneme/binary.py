"""Locate the `mneme` executable the Python API drives."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

__all__ = ["find_mneme_binary", "MnemeNotFoundError"]


class MnemeNotFoundError(FileNotFoundError):
    """No usable `mneme` executable was found."""


def _repo_build_binary() -> Path:
    # python/mneme/binary.py -> the repository root is three levels up; `make`
    # leaves the binary in build/bin there.
    return Path(__file__).resolve().parents[2] / "build" / "bin" / "mneme"


def find_mneme_binary() -> str:
    """The mneme binary: $MNEME_BIN, else `mneme` on PATH, else the repository's build/bin/mneme."""
    env = os.environ.get("MNEME_BIN")
    if env:
        if not (os.path.isfile(env) and os.access(env, os.X_OK)):
            raise MnemeNotFoundError(f"MNEME_BIN={env!r} is not an executable file")
        return env
    on_path = shutil.which("mneme")
    if on_path:
        return on_path
    built = _repo_build_binary()
    if built.is_file() and os.access(built, os.X_OK):
        return str(built)
    raise MnemeNotFoundError(
        "cannot find the mneme binary: set MNEME_BIN, put mneme on PATH, or build it with `make` "
        f"(expected at {built})"
    )
