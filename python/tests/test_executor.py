"""AsyncReplayExecutor against the stand-in worker: results, crashes, timeouts, restarts."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from mneme.async_executor import AsyncReplayExecutor, WorkerCrashedError, WorkerProtocolError, WorkerStartupError
from mneme.mneme_types import ExperimentConfiguration
from mneme.tuning.sample_strategy import ExhaustiveSamplingStrategy
from conftest import INSTANCE
from vecadd_space import VecAddSpace


def config(passes: str = "default<O3>", block_x: int = 128) -> ExperimentConfiguration:
    return ExperimentConfiguration.from_dict({"grid": {"x": 64}, "block": {"x": block_x}, "passes": passes})


def make(recording: Path, command: list[str], tmp_path: Path, **kw: object) -> AsyncReplayExecutor:
    env = {**os.environ, "STANDIN_EVENTS": str(tmp_path / "events"), **kw.pop("extra_env", {})}  # type: ignore[dict-item]
    return AsyncReplayExecutor(record_db=recording, record_id=INSTANCE, iterations=5,
                               results_db_dir=tmp_path / "results", num_workers=kw.pop("num_workers", 1),  # type: ignore[arg-type]
                               worker_command=command, env=env, **kw)  # type: ignore[arg-type]


def events(tmp_path: Path) -> list[str]:
    return (tmp_path / "events").read_text().splitlines()


def test_evaluate_and_submit(recording: Path, standin_command: list[str], tmp_path: Path) -> None:
    with make(recording, standin_command, tmp_path) as ex:
        r = ex.evaluate(config(block_x=192))
        assert r.verified and r.status == "verified"
        assert r.exec_time == [192.0] * 5
        assert r.spill_loads == 0 and r.gpu_id == 0
        futures = [ex.submit(config(block_x=64 * i)) for i in range(1, 9)]
        assert [f.result(timeout=30).exec_time[0] for f in futures] == [64.0 * i for i in range(1, 9)]
        assert all(f.done() for f in futures)
        assert ex.kernel_name == "_Z6vecaddPKfS0_Pfi" and ex.device and ex.device["warp_size"] == 32
    log = tmp_path / "results" / "Worker-0.log"
    assert log.is_file() and "stand-in worker: opened on GPU 0" in log.read_text()
    ev = events(tmp_path)
    assert ev[0].split()[1:] == ["open", "gpu=0", f"db={recording}", f"instance={INSTANCE}"]
    assert ev[-1].endswith("close")
    with pytest.raises(RuntimeError, match="shut down"):
        ex.submit(config())


def test_crash_fails_the_future_and_restarts(recording: Path, standin_command: list[str], tmp_path: Path) -> None:
    with make(recording, standin_command, tmp_path) as ex:
        before = ex.submit(config(block_x=64))
        crashed = ex.submit(config("crash"))
        after = ex.submit(config(block_x=96))
        assert before.result().verified
        with pytest.raises(WorkerCrashedError, match=r"^Worker crashed \(exit code 3\)") as info:
            crashed.result()
        assert info.value.exit_code == 3
        assert after.result().exec_time[0] == 96.0
    opens = [e for e in events(tmp_path) if " open " in e]
    assert len(opens) == 2 and opens[0].split()[0] != opens[1].split()[0]
    assert "Worker crashed (exit code 3)" in (tmp_path / "results" / "Worker-0.log").read_text()


def test_fault_that_closes_the_worker_restarts_it(recording: Path, standin_command: list[str], tmp_path: Path) -> None:
    with make(recording, standin_command, tmp_path) as ex:
        r = ex.evaluate(config("fault"))
        assert r.status == "runtime_error" and not r.verified and "illegal memory access" in r.error
        assert ex.evaluate(config(block_x=32)).verified
    assert len([e for e in events(tmp_path) if " open " in e]) == 2


def test_timeout_kills_and_restarts(recording: Path, standin_command: list[str], tmp_path: Path) -> None:
    with make(recording, standin_command, tmp_path, trial_timeout=1.0) as ex:
        start = time.monotonic()
        r = ex.evaluate(config("hang"))
        assert 0.9 < time.monotonic() - start < 10
        assert r.status == "timeout" and r.failed and not r.verified and "1.0 s" in r.error
        # A slow answer within the limit is fine.
        assert ex.evaluate(config("slow:200")).verified
    pids = {e.split()[0] for e in events(tmp_path) if " open " in e}
    assert len(pids) == 2
    hung = [e.split()[0] for e in events(tmp_path) if "run hang" in e][0]
    with pytest.raises(ProcessLookupError):
        os.kill(int(hung), 0)


def test_noise_on_stdout_is_ignored(recording: Path, standin_command: list[str], tmp_path: Path) -> None:
    with make(recording, standin_command, tmp_path) as ex:
        assert ex.evaluate(config("noise")).verified
    assert "not JSON" in (tmp_path / "results" / "Worker-0.log").read_text()


def test_startup_retries_then_gives_up(recording: Path, standin_command: list[str], tmp_path: Path) -> None:
    counter = tmp_path / "fail-counter"
    # Two failed opens, then success: within max_startup_failures=3.
    with make(recording, standin_command, tmp_path, extra_env={"STANDIN_FAIL_OPEN": "2", "STANDIN_FAIL_COUNTER": str(counter)}) as ex:
        assert ex.evaluate(config()).verified
    assert counter.read_text() == "2"
    # Every open fails: after 3 tries the job fails with the start error, and so do later ones.
    with make(recording, standin_command, tmp_path / "b", extra_env={"STANDIN_FAIL_OPEN": "all"}) as ex:
        with pytest.raises(WorkerStartupError, match="failed to start 3 time"):
            ex.evaluate(config())
        with pytest.raises(WorkerStartupError):
            ex.submit(config()).result(timeout=10)
    assert len([e for e in events(tmp_path / "b") if "open-failed" in e]) == 3
    # Without a GPU, retrying cannot help: one try.
    with make(recording, standin_command, tmp_path / "c", extra_env={"STANDIN_FAIL_OPEN": "nogpu"}) as ex:
        with pytest.raises(WorkerStartupError, match="1 time"):
            ex.evaluate(config())


def test_worker_that_cannot_start_at_all(recording: Path, tmp_path: Path) -> None:
    with make(recording, [str(tmp_path / "no-such-binary")], tmp_path) as ex:
        with pytest.raises(WorkerStartupError, match="failed to start 3 time"):
            ex.evaluate(config())


def test_two_workers_on_selected_gpus(recording: Path, standin_command: list[str], tmp_path: Path) -> None:
    with make(recording, standin_command, tmp_path, num_workers=2, gpus=[3, 5]) as ex:
        assert ex.gpus == [3, 5]
        futures = [ex.submit(config("slow:50", block_x=32 * (i + 1))) for i in range(8)]
        results = [f.result(timeout=30) for f in futures]
    assert {r.gpu_id for r in results} == {3, 5}
    assert (tmp_path / "results" / "Worker-3.log").is_file() and (tmp_path / "results" / "Worker-5.log").is_file()
    gpus = sorted(re.search(r"gpu=(\d+)", e).group(1) for e in events(tmp_path) if " open " in e)  # type: ignore[union-attr]
    assert gpus == ["3", "5"]


def test_exhaustive_tuning_throughput(recording: Path, standin_command: list[str], tmp_path: Path) -> None:
    """The 80-configuration vector-add loop as a user writes it; the executor must not be the bottleneck."""
    configs = list(ExhaustiveSamplingStrategy(VecAddSpace()))
    with make(recording, standin_command, tmp_path) as ex:
        ex.evaluate(VecAddSpace().baseline())  # the worker is up
        start = time.perf_counter()
        results = [ex.evaluate(c) for c in configs if c.is_valid()]
        rate = len(results) / (time.perf_counter() - start)
    assert len(results) == 80 and all(r.verified for r in results)
    assert rate >= 200, f"{rate:.0f} configurations/s"


def test_argument_errors(recording: Path, standin_command: list[str], tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="iterations"):
        AsyncReplayExecutor(recording, INSTANCE, 0, tmp_path, 1, worker_command=standin_command)
    with pytest.raises(ValueError, match="num_workers"):
        AsyncReplayExecutor(recording, INSTANCE, 5, tmp_path, 0, worker_command=standin_command)
    with pytest.raises(FileNotFoundError, match="record_db"):
        AsyncReplayExecutor(tmp_path / "none.json", INSTANCE, 5, tmp_path, 1, worker_command=standin_command)
    with pytest.raises(ValueError, match="verify"):
        AsyncReplayExecutor(recording, INSTANCE, 5, tmp_path, 1, verify="close", worker_command=standin_command)


@pytest.mark.parametrize("passes", ["badtype", "deep", "badjson"])
def test_unreadable_answer_breaks_and_restarts_the_worker(recording: Path, standin_command: list[str], tmp_path: Path, passes: str) -> None:
    with make(recording, standin_command, tmp_path, trial_timeout=30.0) as ex:
        bad = ex.submit(config(passes))
        with pytest.raises(WorkerProtocolError, match="unreadable answer .* killed and restarted"):
            bad.result(timeout=30)
        # The worker was restarted: the next configuration runs.
        assert ex.submit(config()).result(timeout=30).verified
    assert len([e for e in events(tmp_path) if " open " in e]) == 2


def test_worker_count_is_bounded(recording: Path, standin_command: list[str], tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="num_workers 1000 exceeds the limit"):
        make(recording, standin_command, tmp_path, num_workers=1000)


def test_worker_log_is_never_written_through_a_link_or_a_fifo(recording: Path, standin_command: list[str], tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (results / "Worker-0.log").symlink_to(victim)
    with pytest.raises(OSError, match="Worker-0.log"):
        make(recording, standin_command, tmp_path)
    assert victim.read_text() == "keep me"
    (results / "Worker-0.log").unlink()
    os.mkfifo(results / "Worker-0.log")
    with pytest.raises(OSError, match="not a regular file"):
        make(recording, standin_command, tmp_path)
