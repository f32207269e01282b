"""`mneme tune` with Mneme's command line (mneme.cli.tune), end to end on the stand-in worker."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import INSTANCE, STANDIN
from mneme.cli.tune import main

# The vector-add space of the tuning example, as a user's tune.py holds it.
USER_SPACE = '''
from mneme.mneme_types import ExperimentConfiguration
from mneme.recorded_execution import RecordedExecution
from mneme.tuning.search_space import CategoricalParam, IntRangeParam, SearchSpace


class EntireSpace(SearchSpace):
    def __init__(self, recorded_kernel: RecordedExecution.KernelInstance, baseline_passes=None):
        self.grid = recorded_kernel.grid_dim
        self.block = recorded_kernel.block_dim
        self.shared_mem = recorded_kernel.shared_mem
        self.baseline_passes = baseline_passes
        self._search_space = {
            "block_dim_x": IntRangeParam("block_dim_x", low=64, high=1024, step=64),
            "passes": CategoricalParam("passes", ["default<O1>", "default<O2>", "default<O3>",
                                                 "default<Os>", "default<Oz>"]),
        }

    def dimensions(self):
        return self._search_space

    def derived(self, params):
        return ExperimentConfiguration.from_dict({
            "block": {"x": params["block_dim_x"], "y": self.block.y, "z": self.block.z},
            "grid": {"x": self.grid.x, "y": self.grid.y, "z": self.grid.z},
            "shared_mem": self.shared_mem,
            "passes": params["passes"],
        })

    def constraints(self, params):
        return True

    def baseline(self):
        d = {"block": self.block.to_dict(), "grid": self.grid.to_dict(), "shared_mem": self.shared_mem}
        if self.baseline_passes:
            d["passes"] = self.baseline_passes
        return ExperimentConfiguration.from_dict(d)
'''

SUMMARY_KEYS = {
    "status", "num_trials_requested", "num_trials_completed", "num_verified", "num_failed_verification",
    "num_invalid_launch", "num_compile_error", "num_runtime_error", "num_invalid_config", "num_internal_error",
    "baseline_metric", "best_metric", "best_speedup", "best_trial",
}


@pytest.fixture
def user(tmp_path: Path, recording: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A user's folder: tune.py, the recording, and `mneme` standing in for the worker."""
    (tmp_path / "tune.py").write_text(USER_SPACE)
    fake = tmp_path / "mneme"
    fake.write_text(f"#!/bin/sh\nshift\nexec {sys.executable} {STANDIN} \"$@\"\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("MNEME_BIN", str(fake))
    monkeypatch.chdir(tmp_path)
    return {"dir": tmp_path, "db": str(recording)}


def base_args(u: dict[str, Any], out: str = "results") -> list[str]:
    return ["--record-database", u["db"], "--record-id", INSTANCE, "--results-dir", out, "--quiet"]


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


def test_exhaustive_user_space(user: dict[str, Any]) -> None:
    rc = main(base_args(user) + ["--space-module", "tune.py:EntireSpace", "--sampler", "exhaustive",
                                 "--iterations", "5", "--warmup", "2", "--workers", "1",
                                 "--metric", "mean", "--objective", "time"])
    assert rc == 0
    out = user["dir"] / "results"
    for name in ("config.json", "search_space.json", "baseline.json", "trials.jsonl", "best.json",
                 "summary.json", "logs/tune.log", "proteus_tuned_kernels.json"):
        assert (out / name).is_file(), name
    summary = read_json(out / "summary.json")
    assert set(summary) == SUMMARY_KEYS
    assert summary["status"] == "ok"
    assert summary["num_trials_completed"] == summary["num_verified"] == 80
    # The stand-in's time is block.x ns: 256 recorded, 64 the best.
    assert summary["baseline_metric"] == 256.0
    assert summary["best_metric"] == 64.0 and summary["best_speedup"] == 4.0
    trials = [json.loads(line) for line in (out / "trials.jsonl").read_text().splitlines()]
    assert len(trials) == 80
    # Product order, the last dimension fastest.
    assert [t["params"]["passes"] for t in trials[:2]] == ["default<O1>", "default<O2>"]
    best = read_json(out / "best.json")
    assert best["trial"] == summary["best_trial"] == 0 and best["config"]["block"]["x"] == 64
    space = read_json(out / "search_space.json")
    assert space["source"] == "module" and space["size"] == 80
    proteus = read_json(out / "proteus_tuned_kernels.json")
    entry = proteus["_Z6vecaddPKfS0_Pfi"]
    assert entry["Pipeline"] == "default<O1>" and entry["OptLevel"] == "1"
    assert read_json(out / "config.json")["sampler"] == "exhaustive"


def test_nothing_beats_baseline(user: dict[str, Any]) -> None:
    # Every candidate is slower than the 256 ns baseline, so best.json is the baseline.
    (user["dir"] / "slow").mkdir()
    (user["dir"] / "slow" / "tune.py").write_text(USER_SPACE.replace("low=64", "low=512"))
    rc = main(base_args(user) + ["--space-module", "slow/tune.py:EntireSpace", "--sampler", "grid",
                                 "--no-proteus-output"])
    assert rc == 0
    out = user["dir"] / "results"
    best = read_json(out / "best.json")
    assert best["trial"] == -1 and best["params"] == {"baseline": True}
    assert read_json(out / "summary.json")["best_speedup"] == 1.0
    assert not (out / "proteus_tuned_kernels.json").exists()


def test_baseline_not_verified(user: dict[str, Any]) -> None:
    # The stand-in answers a runtime error for passes "fault".
    rc = main(base_args(user) + ["--space-module", "tune.py:EntireSpace", "--sampler", "exhaustive",
                                 "--space-arg", "baseline_passes=fault"])
    assert rc == 1
    out = user["dir"] / "results"
    assert read_json(out / "summary.json")["status"] == "baseline_failed"
    assert read_json(out / "baseline.json")["status"] == "runtime_error"
    assert not (out / "trials.jsonl").exists()


@pytest.mark.parametrize("extra, message", [
    (["--sampler", "random"], "--trials is required"),
    (["--sampler", "exhaustive", "--trials", "5"], "--trials does not apply"),
    (["--sampler", "exhaustive", "--launch-dim", "w"], "--launch-dim"),
    (["--sampler", "exhaustive", "--iterations", "0"], "--iterations"),
    (["--sampler", "exhaustive", "--space-module", "tune.py:NoSuchSpace"], "NoSuchSpace"),
    (["--sampler", "exhaustive", "--space-module", "tune.py:EntireSpace", "--passes", "default<O1>"], "--passes"),
    (["--sampler", "random", "--trials", "3", "--optuna-storage", "sqlite:///x.db"], "--optuna-storage needs"),
    (["--sampler", "exhaustive", "--rerun-baseline"], "--rerun-baseline needs --resume"),
])
def test_bad_flags_exit_3(user: dict[str, Any], capsys: pytest.CaptureFixture[str], extra: list[str], message: str) -> None:
    assert exit_code(base_args(user) + extra) == 3
    assert message in capsys.readouterr().err


def exit_code(argv: list[str]) -> int:
    """main()'s code, or argparse's exit code for a command line it refuses."""
    try:
        return main(argv)
    except SystemExit as e:
        return int(e.code or 0)


def test_argparse_errors_exit_3(user: dict[str, Any]) -> None:
    assert exit_code(base_args(user) + ["--sampler", "bogus"]) == 3
    assert exit_code(base_args(user) + ["--space-arg", "novalue"]) == 3


def test_record_load_failures_exit_4(user: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--space-module", "tune.py:EntireSpace", "--sampler", "exhaustive", "--results-dir", "r"]
    assert main(["--record-database", "missing.json", "--record-id", INSTANCE] + args) == 4
    assert main(["--record-database", user["db"], "--record-id", "ffff"] + args) == 4
    assert "--record-id ffff" in capsys.readouterr().err


def test_dump_config(user: dict[str, Any]) -> None:
    rc = main(["--record-database", user["db"], "--record-id", INSTANCE, "--space-preset", "compiler",
               "--sampler", "exhaustive", "--codegen-opt-range", "0:2", "--dump-config", "dumped.json"])
    assert rc == 0
    doc = read_json(user["dir"] / "dumped.json")
    assert doc["sampler"] == "exhaustive" and doc["iterations"] == 5 and doc["warmup"] == 2
    assert doc["metric"] == "mean" and doc["objective"] == "time" and doc["workers"] == 1
    assert doc["codegen_opt_range"] == "0:2:1" and "dump_config" not in doc
    assert not (user["dir"] / "mneme-tune-results").exists()
    # What was dumped reads back as a --config file.
    assert main(["--config", "dumped.json", "--dump-config", "again.yaml", "--iterations", "9"]) == 0
    assert "iterations: 9" in (user["dir"] / "again.yaml").read_text()


def test_config_yaml_nested_search(user: dict[str, Any]) -> None:
    (user["dir"] / "config.yml").write_text(
        f"record_database: {user['db']}\n"
        f"record_id: \"{INSTANCE}\"\n"
        "space_module: tune.py:EntireSpace\n"
        "search:\n"
        "  sampler: exhaustive\n"
        "  iterations: 3\n"
        "  metric: median\n"
        "results_dir: from-config\n"
        "keep_going: false\n"
        "quiet: true\n")
    # The command line wins over the file.
    rc = main(["--config", "config.yml", "--iterations", "4"])
    assert rc == 0
    config = read_json(user["dir"] / "from-config" / "config.json")
    assert config["sampler"] == "exhaustive" and config["metric"] == "median" and config["iterations"] == 4
    assert config["fail_fast"] is True
    assert read_json(user["dir"] / "from-config" / "summary.json")["num_verified"] == 80


def test_config_unknown_key(user: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    (user["dir"] / "bad.yml").write_text("search:\n  samplr: tpe\n")
    assert main(["--config", "bad.yml"]) == 3
    assert "unknown key 'samplr'" in capsys.readouterr().err


def test_tpe_optuna_storage(user: dict[str, Any]) -> None:
    optuna = pytest.importorskip("optuna")
    storage = f"sqlite:///{user['dir'] / 'study.db'}"
    rc = main(base_args(user) + ["--space-module", "tune.py:EntireSpace", "--sampler", "tpe", "--trials", "6",
                                 "--seed", "1", "--optuna-storage", storage, "--study-name", "vecadd",
                                 "--pruner", "median"])
    assert rc == 0
    study = optuna.load_study(study_name="vecadd", storage=storage)
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    summary = read_json(user["dir"] / "results" / "summary.json")
    assert summary["num_trials_requested"] == 6
    assert len(done) == summary["num_verified"] >= 1
    assert study.best_value == summary["best_metric"]
    trials = [json.loads(line) for line in (user["dir"] / "results" / "trials.jsonl").read_text().splitlines()]
    assert all(set(t["params"]) == {"block_dim_x", "passes"} for t in trials)


def test_builtin_launch_preset(user: dict[str, Any]) -> None:
    rc = main(base_args(user) + ["--space-preset", "launch", "--launch-dim", "x", "--launch-safety", "aggressive",
                                 "--passes", "default<O1>", "default<O3>", "--fixed-codegen-opt", "3",
                                 "--sampler", "exhaustive"])
    assert rc == 0
    out = user["dir"] / "results"
    space = read_json(out / "search_space.json")
    assert space["source"] == "builtin" and space["size"] == 64  # 32..1024 step 32, two pipelines
    best = read_json(out / "best.json")
    # The grid is resized to cover the recorded threads (4096 blocks of 256).
    assert best["config"]["block"]["x"] == 32 and best["config"]["grid"]["x"] == 4096 * 256 // 32


def test_random_timeout_resume(user: dict[str, Any]) -> None:
    args = base_args(user) + ["--space-module", "tune.py:EntireSpace", "--sampler", "random", "--trials", "10",
                              "--seed", "7"]
    assert main(args) == 0
    out = user["dir"] / "results"
    assert read_json(out / "summary.json")["num_trials_completed"] == 10
    # A second run needs --resume; then it skips the ten done configurations.
    assert main(args) == 3
    assert main(args + ["--resume"]) == 0
    assert len((out / "trials.jsonl").read_text().splitlines()) == 10
    assert main(args + ["--resume", "--rerun-baseline", "--timeout", "0.001"]) == 0


def test_print_space_and_dry_run(user: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--record-database", user["db"], "--record-id", INSTANCE, "--space-preset", "full", "--sampler", "tpe",
            "--trials", "5"]
    assert main(args + ["--print-space"]) == 0
    space = json.loads(capsys.readouterr().out)
    assert {"block_shape", "passes", "codegen_opt", "specialize", "set_launch_bounds"} <= set(space["dimensions"])
    assert main(args + ["--dry-run"]) == 0
    assert json.loads(capsys.readouterr().out)["baseline"]["block"]["x"] == 256


def test_module_entry_point(user: dict[str, Any]) -> None:
    env = dict(os.environ)
    proc = subprocess.run([sys.executable, "-m", "mneme.cli.tune", "--record-database", user["db"],
                           "--record-id", INSTANCE, "--space-module", "tune.py:EntireSpace", "--sampler",
                           "exhaustive", "--results-dir", "cli", "--fail-fast"],
                          capture_output=True, text=True, env=env, cwd=user["dir"], timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "best: trial 0" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "mneme.cli.tune", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "--optuna-storage" in proc.stdout


def test_failing_candidates(user: dict[str, Any]) -> None:
    # The stand-in's worker exits mid-trial for passes "crash": counted as runtime errors, then restarted.
    (user["dir"] / "crashy").mkdir()
    (user["dir"] / "crashy" / "tune.py").write_text(
        USER_SPACE.replace('"default<Oz>"', '"crash"').replace("high=1024", "high=256"))
    args = base_args(user) + ["--space-module", "crashy/tune.py:EntireSpace", "--sampler", "exhaustive"]
    assert main(args) == 0
    summary = read_json(user["dir"] / "results" / "summary.json")
    assert summary["num_runtime_error"] == 4 and summary["num_verified"] == 16 and summary["status"] == "ok"
    assert main(args[:-4] + ["--results-dir", "ff", "--fail-fast"] + args[-4:]) == 0
    summary = read_json(user["dir"] / "ff" / "summary.json")
    assert summary["status"] == "stopped_fail_fast" and summary["num_trials_completed"] == 5
