"""A resumed `mneme tune` numbers its new trials after the old ones and runs no old configuration again."""

from __future__ import annotations

import json
from typing import Any

from test_cli_tune import base_args, user  # noqa: F401  (user is a fixture)


def _trials(path: Any) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_resume_numbers_new_trials_after_the_old(user: dict[str, Any]) -> None:  # noqa: F811
    args = base_args(user) + ["--space-module", "tune.py:EntireSpace", "--sampler", "random", "--seed", "3"]
    from mneme.cli.tune import main

    assert main(args + ["--trials", "4"]) == 0
    path = user["dir"] / "results" / "trials.jsonl"
    old = _trials(path)
    assert [r["trial"] for r in old] == [0, 1, 2, 3]
    assert main(args + ["--trials", "9", "--resume"]) == 0
    all_trials = _trials(path)
    assert all_trials[:4] == old
    assert [r["trial"] for r in all_trials[4:]] == [4, 5, 6, 7, 8]
    hashes = [r["config_hash"] for r in all_trials]
    assert len(set(hashes)) == len(hashes)
