"""The Python side of `mneme tune` (python -m mneme.propose) and the mneme-tune entry point.

The Go engine runs the trials; these tests speak its JSON-lines protocol to
the proposer directly, as the engine does, over the Go-written recording.
"""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import INSTANCE
from mneme import propose
from mneme.propose import serve

USER_SPACE = '''
from mneme.mneme_types import ExperimentConfiguration
from mneme.recorded_execution import RecordedExecution
from mneme.tuning.search_space import CategoricalParam, IntRangeParam, SearchSpace


class EntireSpace(SearchSpace):
    def __init__(self, recorded_kernel: RecordedExecution.KernelInstance, fail_at=None):
        self.grid = recorded_kernel.grid_dim
        self.block = recorded_kernel.block_dim
        self.fail_at = fail_at
        print("EntireSpace built")

    def dimensions(self):
        return {"block_dim_x": IntRangeParam("block_dim_x", low=64, high=1024, step=64),
                "passes": CategoricalParam("passes", ["default<O1>", "default<O2>", "default<O3>", "default<Os>", "default<Oz>"])}

    def derived(self, params):
        if params["block_dim_x"] == self.fail_at:
            raise RuntimeError("no configuration here")
        n = self.grid.x * self.block.x
        return ExperimentConfiguration.from_dict({
            "block": {"x": params["block_dim_x"]}, "grid": {"x": -(-n // params["block_dim_x"])},
            "passes": params["passes"]})

    def constraints(self, params):
        return True

    def baseline(self):
        return ExperimentConfiguration.from_dict({"block": self.block.to_dict(), "grid": self.grid.to_dict()})
'''


def converse(requests: list[dict[str, Any] | str]) -> list[dict[str, Any]]:
    lines = "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in requests)
    out = io.StringIO()
    serve(io.BytesIO(lines.encode()), out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


@pytest.fixture
def space_file(tmp_path: Path) -> Path:
    path = tmp_path / "tune.py"
    path.write_text(USER_SPACE)
    return path


def open_module(space_file: Path, recording: Path, **kw: Any) -> dict[str, Any]:
    req = {"op": "open", "space_module": f"{space_file}:EntireSpace", "record_database": str(recording),
           "record_id": INSTANCE, "sampler": "exhaustive"}
    req.update(kw)
    return req


def test_exhaustive_user_space(space_file: Path, recording: Path) -> None:
    answers = converse([open_module(space_file, recording), {"op": "ask"}])
    opened = answers[0]
    assert opened["ok"], opened
    space = opened["space"]
    assert space["size"] == 80 and space["feasible"] == 80
    assert [p["name"] for p in space["params"]] == ["block_dim_x", "passes"]
    assert space["params"][0] == {"name": "block_dim_x", "kind": "int", "low": 64, "high": 1024, "step": 64}
    assert space["baseline"]["grid"] == {"x": 4096, "y": 1, "z": 1} and space["baseline"]["block"]["x"] == 256
    # The whole exhaustive order comes with the open answer: one round trip.
    points = opened["points"]
    assert len(points) == 80
    # Product order, the last dimension fastest, each with the class's configuration.
    assert points[0]["params"] == {"block_dim_x": 64, "passes": "default<O1>"}
    assert points[1]["params"] == {"block_dim_x": 64, "passes": "default<O2>"}
    assert points[5]["params"]["block_dim_x"] == 128
    assert points[0]["config"]["block"] == {"x": 64, "y": 1, "z": 1} and points[0]["config"]["grid"]["x"] == 16384
    assert len({p["id"] for p in points}) == 80
    assert answers[1] == {"ok": True, "done": True}


def test_exhaustive_beyond_the_batch_is_asked(space_file: Path, recording: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A space larger than one open answer may carry is proposed one ask at a
    # time, in the same order.
    monkeypatch.setattr(propose, "MAX_BATCH", 79)
    answers = converse([open_module(space_file, recording)] + [{"op": "ask"}] * 81)
    assert "points" not in answers[0] and answers[0]["space"]["feasible"] == 80
    assert answers[1]["params"] == {"block_dim_x": 64, "passes": "default<O1>"}
    assert answers[6]["params"]["block_dim_x"] == 128 and answers[6]["config"]["block"]["x"] == 128
    assert len({a["id"] for a in answers[1:81]}) == 80
    assert answers[81] == {"ok": True, "done": True}


def test_failing_derivation_is_reported_not_fatal(space_file: Path, recording: Path) -> None:
    opened = converse([open_module(space_file, recording, space_args=["fail_at=64"])])[0]
    assert opened["ok"], opened
    points = opened["points"]
    for a in points[0:5]:
        assert "config" not in a and "RuntimeError: no configuration here" in a["reason"]
    assert points[5]["params"]["block_dim_x"] == 128 and "config" in points[5]


def test_random_is_seeded_and_distinct(space_file: Path, recording: Path) -> None:
    def draw(seed: int) -> list[Any]:
        answers = converse([open_module(space_file, recording, sampler="random", trials=10, seed=seed), {"op": "ask"}])
        assert answers[-1] == {"ok": True, "done": True}
        return [a["params"] for a in answers[0]["points"]]

    a, b, c = draw(7), draw(7), draw(8)
    assert a == b and a != c
    assert len({json.dumps(p, sort_keys=True) for p in a}) == 10


def test_optuna_over_the_engines_params(tmp_path: Path) -> None:
    pytest.importorskip("optuna")
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    params = [{"name": "block_x", "kind": "int", "low": 64, "high": 1024, "step": 64},
              {"name": "passes", "kind": "pipeline", "choices": ["default<O2>", "default<O3>"]},
              {"name": "specialize", "kind": "bool", "choices": [False, True]},
              {"name": "codegen_opt", "kind": "fixed", "choices": [3]}]
    reqs: list[dict[str, Any] | str] = [{"op": "open", "params": params, "sampler": "tpe", "trials": 6, "seed": 1,
                                         "study_name": "s", "optuna_storage": storage, "pruner": "median"}]
    for i in range(1, 7):
        reqs += [{"op": "ask"}, {"op": "tell", "id": i, "loss": 1000.0 + i} if i % 3 else {"op": "tell", "id": i, "status": "compile_error"}]
    reqs.append({"op": "ask"})
    answers = converse(reqs)
    assert answers[0] == {"ok": True}  # the engine's own space: nothing to describe
    asks = answers[1:13:2]
    for a in asks:
        assert "config" not in a  # the engine derives
        assert set(a["params"]) == {"block_x", "passes", "specialize", "codegen_opt"} and a["params"]["codegen_opt"] == 3
    assert answers[-1] == {"ok": True, "done": True}
    import optuna

    study = optuna.load_study(study_name="s", storage=storage)
    states = [t.state.name for t in study.trials]
    assert states.count("COMPLETE") == 4 and states.count("FAIL") == 2
    assert study.best_value == 1001.0


@pytest.mark.parametrize("request_line, message", [
    ("not json", "not JSON"),
    ("[" * 100000 + "]" * 100000, "not JSON"),
    ('{"op": "ask"}', "ask before open"),
    ('{"op": "frobnicate"}', "unknown op"),
    ('"a string"', "not a JSON object"),
])
def test_bad_requests_are_answered(request_line: str, message: str) -> None:
    (answer,) = converse([request_line])
    assert answer["ok"] is False and message in answer["error"]


@pytest.mark.parametrize("spec, message", [
    ("./nowhere.py:X", "--space-module ./nowhere.py:X: no file ./nowhere.py"),
    ("{file}:Nope", "Nope is not a SearchSpace class"),
    ("{file}", "want <file>.py:Class"),
])
def test_bad_space_module_names_the_flag(space_file: Path, recording: Path, spec: str, message: str) -> None:
    (answer,) = converse([open_module(space_file, recording, space_module=spec.format(file=space_file))])
    assert answer["ok"] is False and message in answer["error"]


def test_bad_recording_names_the_flag(space_file: Path, recording: Path) -> None:
    (answer,) = converse([open_module(space_file, recording, record_id="0000")])
    assert answer["ok"] is False and answer["error"].startswith("--record-database:")


def test_user_output_goes_to_stderr(space_file: Path, recording: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parents[1]))
    lines = json.dumps(open_module(space_file, recording)) + "\n" + json.dumps({"op": "ask"}) + "\n" + '{"op": "close"}\n'
    p = subprocess.run([sys.executable, "-m", "mneme.propose"], input=lines, capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    answers = [json.loads(line) for line in p.stdout.splitlines()]
    assert [a["ok"] for a in answers] == [True, True, True]
    assert "EntireSpace built" in p.stderr


def test_mneme_tune_entry_point_runs_the_engine(tmp_path: Path) -> None:
    fake = tmp_path / "mneme"
    fake.write_text('#!/bin/sh\necho "argv: $*"\necho "python: $MNEME_PYTHON"\nexit 3\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    env = dict(os.environ, MNEME_BIN=str(fake), PYTHONPATH=str(Path(__file__).parents[1]))
    env.pop("MNEME_PYTHON", None)
    p = subprocess.run([sys.executable, "-m", "mneme.cli.tune", "--record-database", "db.json", "--space-preset", "quick"],
                       capture_output=True, text=True, env=env, timeout=60)
    # The engine's own exit code and output, the arguments unchanged.
    assert p.returncode == 3
    assert "argv: tune --record-database db.json --space-preset quick" in p.stdout
    # The interpreter that ran the entry point, however its path was spelled
    # (`python/../.venv/bin/python` comes back as `.venv/bin/python`).
    python = next(line.removeprefix("python: ") for line in p.stdout.splitlines() if line.startswith("python: "))
    assert os.path.abspath(python) == os.path.abspath(sys.executable)
