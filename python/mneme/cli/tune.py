"""`mneme-tune` and `python -m mneme.cli.tune`: Mneme's `mneme tune` entry points.

There is one tuner, the `mneme tune` command (the Go engine), which reads
Mneme's flags and config.yml keys as well as its own. This entry point only
replaces itself with that command, passing the arguments unchanged, so a
script that ran Mneme's Python `mneme tune` runs the same engine, with the
same results folder, summary and exit codes (the README's table).
"""

from __future__ import annotations

import os
import sys
from typing import Sequence

from ..binary import find_mneme_binary


def main(argv: Sequence[str] | None = None) -> int:
    """Runs `mneme tune ARGS`; returns its exit code when exec is not possible."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        binary = find_mneme_binary()
    except Exception as e:
        print(f"mneme tune: {e}", file=sys.stderr)
        return 2
    env = dict(os.environ)
    # The engine starts this interpreter for --space-module and Optuna.
    env.setdefault("MNEME_PYTHON", sys.executable)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(binary, [binary, "tune", *args], env)
    return 1  # not reached


if __name__ == "__main__":
    raise SystemExit(main())
