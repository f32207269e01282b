"""Evaluate configurations on `mneme worker` processes, one per GPU.

`AsyncReplayExecutor` keeps one long-lived worker process per GPU, each with
one open replay session (tune/PROTOCOL.md), and hands out jobs from a shared
queue. Each worker has a driver thread (sends requests, waits for answers) and
a reader thread (parses the worker's stdout); nothing sleeps or polls, so the
cost per configuration is a pipe round trip plus the replay itself.

Fault isolation: a worker that exits mid-trial fails that trial's future with
`WorkerCrashedError` ("Worker crashed (exit code N) ...") and is restarted; a
trial that exceeds `trial_timeout` gets a result with status "timeout", and its
worker's process group is killed and restarted. A worker whose answer cannot
be read (not JSON though it looks like an answer, nested too deeply, too
long, or of the wrong types) fails that trial with `WorkerProtocolError` and
is killed and restarted, as the Go executor does: its session can no longer
be trusted. Worker counts are bounded by the machine as in the Go tuner
(4 per CPU core). A worker that fails to start
`max_startup_failures` times in a row gives up; when every worker has given
up, pending and later jobs fail with the start error.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import stat
import subprocess
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import IO, Any, Mapping, Sequence

from .binary import find_mneme_binary
from .mneme_types import ExperimentConfiguration, ExperimentResult

__all__ = [
    "AsyncReplayExecutor",
    "WorkerCrashedError",
    "WorkerStartupError",
    "WorkerProtocolError",
]


class WorkerCrashedError(RuntimeError):
    """The worker process exited while a trial was in flight."""

    def __init__(self, message: str, exit_code: int | None):
        super().__init__(message)
        self.exit_code = exit_code


class WorkerStartupError(RuntimeError):
    """A worker could not be started and opened (after retries)."""


class WorkerProtocolError(RuntimeError):
    """The worker refused a request (`ok: false`)."""


class _WorkerDied(Exception):
    pass


class _WorkerTimedOut(Exception):
    pass


class _OpenFailed(Exception):
    def __init__(self, message: str, no_gpu: bool):
        super().__init__(message)
        self.no_gpu = no_gpu


_STOP = object()
_EOF = object()


class _Unreadable:
    """An answer line the reader could not read; the worker is broken."""

    def __init__(self, why: str):
        self.why = why


class _WorkerUnreadable(Exception):
    pass


# One answer line at most, as the Go executor bounds it.
MAX_ANSWER = 16 << 20
# Worker processes per CPU core, as the Go tuner bounds them.
MAX_WORKERS_PER_CORE = 4


def _open_log(path: Path) -> IO[bytes]:
    """The worker's log for appending: a regular file of the folder, never
    written through a link, never waited on (a FIFO is refused)."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as e:
        try:
            irregular = not stat.S_ISREG(os.lstat(path).st_mode)
        except OSError:
            irregular = False
        if irregular:
            raise OSError(f"{path}: not a regular file (a link, a FIFO or a device): a worker log must be one") from None
        raise OSError(e.errno, f"{path}: {e.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{path}: not a regular file (a worker log must be one)")
    return os.fdopen(fd, "ab", buffering=0)

# How long a worker may take to answer "close" before it is killed.
_CLOSE_GRACE_S = 10.0


class _Worker:
    """One worker process slot: a GPU, a log file, a driver and a reader thread."""

    def __init__(self, executor: "AsyncReplayExecutor", index: int, gpu: int, log_path: Path):
        self.executor = executor
        self.index = index
        self.gpu = gpu
        self.log_path = log_path
        self.log: IO[bytes] = _open_log(log_path)
        self.proc: subprocess.Popen[bytes] | None = None
        self.responses: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.next_id = 0
        self.starts = 0
        self.open_info: dict[str, Any] = {}
        self.thread = threading.Thread(target=self._main, name=f"mneme-worker-{gpu}", daemon=True)

    # -- logging ---------------------------------------------------------

    def note(self, message: str) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
        try:
            self.log.write(f"[{stamp}Z executor] {message}\n".encode())
        except (OSError, ValueError):
            pass  # logging must never take a trial down

    # -- process management ---------------------------------------------

    def _spawn(self) -> None:
        ex = self.executor
        self.responses = queue.SimpleQueue()
        # Its own session (process group), so a kill reaches whatever the
        # worker started too.
        proc = subprocess.Popen(
            list(ex.worker_command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            env=ex.env,
            start_new_session=True,
        )
        self.proc = proc
        self.starts += 1
        reader = threading.Thread(target=self._read, args=(proc, self.responses), name=f"mneme-reader-{self.gpu}", daemon=True)
        reader.start()

    def _read(self, proc: "subprocess.Popen[bytes]", responses: "queue.SimpleQueue[Any]") -> None:
        # Whatever happens here, the driver hears of it: an answer, an
        # unreadable answer, or the end.
        try:
            assert proc.stdout is not None
            while True:
                line = proc.stdout.readline(MAX_ANSWER + 1)
                if not line:
                    break
                if len(line) > MAX_ANSWER:
                    responses.put(_Unreadable(f"an answer longer than {MAX_ANSWER} bytes"))
                    return
                line = line.strip()
                if not line:
                    continue
                try:
                    msg = json.loads(line)
                except (ValueError, RecursionError) as e:
                    if line.startswith(b"{"):
                        responses.put(_Unreadable(f"an answer that is not JSON ({type(e).__name__}): {line[:120]!r}"))
                        return
                    self.note(f"ignored a line on stdout that is not JSON: {line[:200]!r}")
                    continue
                if isinstance(msg, dict):
                    responses.put(msg)
                else:
                    responses.put(_Unreadable(f"an answer that is not a JSON object: {line[:120]!r}"))
                    return
        except Exception as e:
            responses.put(_Unreadable(f"reading the answers failed: {type(e).__name__}: {e}"))
        finally:
            responses.put(_EOF)

    def _kill(self) -> int | None:
        proc = self.proc
        self.proc = None
        if proc is None:
            return None
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                proc.kill()
        rc = proc.wait()
        for stream in (proc.stdin, proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        return rc

    def _reap(self) -> int | None:
        """Exit code of a worker that closed its stdout (it is exiting), killing it if it lingers."""
        proc = self.proc
        if proc is None:
            return None
        try:
            proc.wait(timeout=_CLOSE_GRACE_S)
        except subprocess.TimeoutExpired:
            pass
        return self._kill()

    def _request(self, op: str, payload: Mapping[str, Any], timeout: float | None) -> dict[str, Any]:
        proc = self.proc
        if proc is None or proc.stdin is None:
            raise _WorkerDied()
        self.next_id += 1
        rid = self.next_id
        line = json.dumps({"id": rid, "op": op, **payload}, separators=(",", ":")) + "\n"
        try:
            proc.stdin.write(line.encode())
            proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            raise _WorkerDied() from None
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                msg = self.responses.get(timeout=remaining)
            except queue.Empty:
                raise _WorkerTimedOut() from None
            if msg is _EOF:
                raise _WorkerDied()
            if isinstance(msg, _Unreadable):
                raise _WorkerUnreadable(msg.why)
            if msg.get("id") == rid:
                return dict(msg)
            self.note(f"ignored an answer for request {msg.get('id')} while waiting for {rid}: {msg}")

    def _start_once(self) -> None:
        ex = self.executor
        self._spawn()
        open_params: dict[str, Any] = {
            "db": ex.record_db,
            "instance": ex.record_id,
            "gpu": self.gpu,
            "iterations": ex.iterations,
            "warmup": ex.warmup,
            "verify": ex.verify,
        }
        if ex.kernel:
            open_params["kernel"] = ex.kernel
        if ex.cache_dir:
            open_params["cache_dir"] = ex.cache_dir
        try:
            msg = self._request("open", {"open": open_params}, ex.open_timeout)
        except _WorkerDied:
            rc = self._reap()
            raise _OpenFailed(f"the worker exited (exit code {rc}) before answering open", False) from None
        except _WorkerTimedOut:
            self._kill()
            raise _OpenFailed(f"the worker did not answer open within {ex.open_timeout} s", False) from None
        except _WorkerUnreadable as e:
            self._kill()
            raise _OpenFailed(f"the worker's answer to open is unreadable: {e}", False) from None
        if not msg.get("ok"):
            self._kill()
            raise _OpenFailed(str(msg.get("error") or "open failed"), bool(msg.get("no_gpu")))
        self.open_info = msg
        ex._note_open(msg)

    def _ensure_started(self) -> None:
        failures = 0
        while True:
            try:
                self._start_once()
                self.note(f"worker pid {self.proc.pid if self.proc else '?'} opened on GPU {self.gpu}")
                return
            except (_OpenFailed, OSError) as e:
                failures += 1
                self.note(f"start {failures} failed: {e}")
                no_gpu = isinstance(e, _OpenFailed) and e.no_gpu
                # Without a GPU another try cannot help.
                if no_gpu or failures >= self.executor.max_startup_failures:
                    raise WorkerStartupError(
                        f"worker for GPU {self.gpu} failed to start {failures} time(s) in a row: {e} (log: {self.log_path})"
                    ) from None

    def _close(self) -> None:
        if self.proc is None:
            return
        try:
            self._request("close", {}, _CLOSE_GRACE_S)
        except (_WorkerDied, _WorkerTimedOut, _WorkerUnreadable):
            pass
        self._reap()

    # -- the driver loop ---------------------------------------------------

    def _run(self, config: ExperimentConfiguration, future: "Future[ExperimentResult]") -> None:
        ex = self.executor
        try:
            msg = self._request("run", {"config": config.to_dict()}, ex.trial_timeout)
        except _WorkerDied:
            rc = self._reap()
            message = (
                f"Worker crashed (exit code {rc}) on GPU {self.gpu} while running configuration "
                f"{config.hash()[:16]}; it was restarted (log: {self.log_path})"
            )
            self.note(message)
            future.set_exception(WorkerCrashedError(message, rc))
            self._restart()
            return
        except _WorkerTimedOut:
            self._kill()
            message = (
                f"no answer within {ex.trial_timeout} s on GPU {self.gpu}; "
                "the worker was killed and restarted"
            )
            self.note(f"configuration {config.hash()[:16]}: {message}")
            future.set_result(ExperimentResult.failure("timeout", message, self.gpu))
            self._restart()
            return
        except _WorkerUnreadable as e:
            self._unreadable(config, future, str(e))
            return
        if not msg.get("ok") or not isinstance(msg.get("result"), dict):
            future.set_exception(WorkerProtocolError(f"worker on GPU {self.gpu} refused run: {msg.get('error') or msg}"))
        else:
            try:
                result = ExperimentResult.from_dict(msg["result"])
                _check_result(result)
            except Exception as e:  # wrong types: the session cannot be trusted
                self._unreadable(config, future, f"a result of the wrong shape: {type(e).__name__}: {e}")
                return
            future.set_result(result)
        if msg.get("closing"):
            # The run left the worker's CUDA context unusable; it exits by itself.
            rc = self._reap()
            self.note(f"worker exited (exit code {rc}) after a fault that left its context unusable; restarting")
            self._restart()

    def _unreadable(self, config: ExperimentConfiguration, future: "Future[ExperimentResult]", why: str) -> None:
        self._kill()
        message = (f"worker on GPU {self.gpu} gave an unreadable answer to configuration {config.hash()[:16]} "
                   f"({why}); it was killed and restarted (log: {self.log_path})")
        self.note(message)
        future.set_exception(WorkerProtocolError(message))
        self._restart()

    def _restart(self) -> None:
        self._ensure_started()

    def _main(self) -> None:
        ex = self.executor
        try:
            self._ensure_started()
            while True:
                job = ex._jobs.get()
                if job is _STOP:
                    break
                config, future = job
                if not future.set_running_or_notify_cancel():
                    continue
                try:
                    self._run(config, future)
                except WorkerStartupError:
                    raise
                except BaseException as e:  # never leave a future unresolved
                    if not future.done():
                        future.set_exception(e)
                    raise
        except WorkerStartupError as e:
            self.note(str(e))
            self._kill()
            ex._worker_gave_up(self, e)
        finally:
            self._close()
            try:
                self.log.close()
            except OSError:
                pass


def _check_result(r: ExperimentResult) -> None:
    """Raises TypeError when a result's fields are not of their types."""
    for name in ("preprocess_ir_time", "opt_time", "codegen_time"):
        v = getattr(r, name)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError(f"{name}: want seconds, got {v!r:.80}")
    for name in ("obj_size", "gpu_id", "const_mem_usage", "local_mem_usage", "reg_usage"):
        v = getattr(r, name)
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{name}: want an integer, got {v!r:.80}")
    for name in ("verified", "executed", "failed"):
        if not isinstance(getattr(r, name), bool):
            raise TypeError(f"{name}: want true or false, got {getattr(r, name)!r:.80}")
    for name in ("start_time", "end_time", "error", "status"):
        if not isinstance(getattr(r, name), str):
            raise TypeError(f"{name}: want a string, got {getattr(r, name)!r:.80}")
    if any(isinstance(t, bool) or not isinstance(t, (int, float)) for t in r.exec_time):
        raise TypeError("exec_time: want a list of nanoseconds")


class AsyncReplayExecutor:
    """Replays configurations of one recorded kernel instance on worker processes.

    Arguments follow Mneme's: `record_db` (the kernel's JSON file or the
    database folder), `record_id` (the instance's dynamic hash), `iterations`
    (timed launches per trial), `results_db_dir` (created; holds the workers'
    logs `Worker-<gpu>.log`), `num_workers`, `warmup`, `max_startup_failures`.
    Ours: `gpus` (the devices to use, worker i on `gpus[i % len(gpus)]`;
    default 0..num_workers-1), `trial_timeout` (seconds; None waits forever),
    `verify` ("bitwise", "tolerance" or "none") with `atol`/`rtol`, `kernel`
    (static hash or name when the instance id alone is ambiguous),
    `cache_dir` (JIT cache shared by the workers), `mneme_bin`,
    `worker_command` (argv replacing `mneme worker`), `env`, `open_timeout`.
    """

    def __init__(
        self,
        record_db: str | os.PathLike[str],
        record_id: str,
        iterations: int,
        results_db_dir: str | os.PathLike[str],
        num_workers: int,
        warmup: int = 2,
        max_startup_failures: int = 3,
        *,
        gpus: Sequence[int] | None = None,
        trial_timeout: float | None = None,
        verify: str = "bitwise",
        atol: float = 0.0,
        rtol: float = 0.0,
        kernel: str | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        mneme_bin: str | None = None,
        worker_command: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        open_timeout: float | None = 600.0,
    ):
        def positive_int(name: str, value: Any, minimum: int) -> int:
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ValueError(f"AsyncReplayExecutor: {name} must be an integer >= {minimum}, got {value!r}")
            return value

        self.iterations = positive_int("iterations", iterations, 1)
        self.warmup = positive_int("warmup", warmup, 0)
        self.num_workers = positive_int("num_workers", num_workers, 1)
        limit = MAX_WORKERS_PER_CORE * (os.cpu_count() or 1)
        if self.num_workers > limit:
            raise ValueError(f"AsyncReplayExecutor: num_workers {num_workers} exceeds the limit of {limit} on this machine "
                             f"({MAX_WORKERS_PER_CORE} per CPU core)")
        self.max_startup_failures = positive_int("max_startup_failures", max_startup_failures, 1)
        if trial_timeout is not None and trial_timeout <= 0:
            raise ValueError(f"AsyncReplayExecutor: trial_timeout must be positive seconds or None, got {trial_timeout!r}")
        if verify not in ("bitwise", "tolerance", "none"):
            raise ValueError(f"AsyncReplayExecutor: verify must be 'bitwise', 'tolerance' or 'none', got {verify!r}")
        if not isinstance(record_id, str):
            raise TypeError(f"AsyncReplayExecutor: record_id must be a string (the dynamic hash), got {record_id!r}")
        db = Path(record_db)
        if not db.exists():
            raise FileNotFoundError(f"AsyncReplayExecutor: record_db {str(db)!r} does not exist")
        self.record_db = str(db.resolve())
        self.record_id = record_id
        self.trial_timeout = trial_timeout
        self.open_timeout = open_timeout
        self.verify: dict[str, Any] = {"mode": verify}
        if verify == "tolerance":
            self.verify.update(atol=float(atol), rtol=float(rtol))
        self.kernel = kernel
        self.cache_dir = str(Path(cache_dir).resolve()) if cache_dir else None
        if worker_command is not None:
            self.worker_command: list[str] = [str(a) for a in worker_command]
        else:
            self.worker_command = [mneme_bin or find_mneme_binary(), "worker"]
        self.env = dict(env) if env is not None else None
        gpu_list = list(gpus) if gpus is not None else list(range(self.num_workers))
        if not gpu_list or any(isinstance(g, bool) or not isinstance(g, int) or g < 0 for g in gpu_list):
            raise ValueError(f"AsyncReplayExecutor: gpus must be non-negative device numbers, got {gpus!r}")
        self.results_db_dir = Path(results_db_dir)
        self.results_db_dir.mkdir(parents=True, exist_ok=True)

        self.device: dict[str, Any] | None = None
        self.kernel_name: str | None = None
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._shutdown = False
        self._broken: WorkerStartupError | None = None
        self._given_up = 0
        self._workers: list[_Worker] = []
        used: dict[int, int] = {}
        for i in range(self.num_workers):
            gpu = gpu_list[i % len(gpu_list)]
            n = used.get(gpu, 0)
            used[gpu] = n + 1
            name = f"Worker-{gpu}.log" if n == 0 else f"Worker-{gpu}-{n}.log"
            self._workers.append(_Worker(self, i, gpu, self.results_db_dir / name))
        for w in self._workers:
            w.thread.start()

    # -- callbacks from worker threads --------------------------------------

    def _note_open(self, msg: Mapping[str, Any]) -> None:
        with self._lock:
            if self.device is None and isinstance(msg.get("device"), dict):
                self.device = dict(msg["device"])
            if self.kernel_name is None and msg.get("kernel"):
                self.kernel_name = str(msg["kernel"])

    def _worker_gave_up(self, worker: _Worker, error: WorkerStartupError) -> None:
        with self._lock:
            self._given_up += 1
            if self._given_up < len(self._workers):
                return
            self._broken = error
        # No worker is left to take jobs: fail what is queued.
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                return
            if job is _STOP:
                continue
            _, future = job
            if future.set_running_or_notify_cancel():
                future.set_exception(error)

    # -- public API ---------------------------------------------------------

    @property
    def gpus(self) -> list[int]:
        return [w.gpu for w in self._workers]

    def submit(self, config: ExperimentConfiguration) -> "Future[ExperimentResult]":
        """Queues a configuration; the future resolves to its ExperimentResult."""
        if not isinstance(config, ExperimentConfiguration):
            raise TypeError(f"submit: want an ExperimentConfiguration, got {type(config).__name__}")
        future: Future[ExperimentResult] = Future()
        with self._lock:
            if self._shutdown:
                raise RuntimeError("submit: the executor has been shut down")
            broken = self._broken
            if broken is None:
                self._jobs.put((config, future))
                return future
        future.set_running_or_notify_cancel()
        future.set_exception(broken)
        return future

    def evaluate(self, config: ExperimentConfiguration) -> ExperimentResult:
        """Runs one configuration and waits for its result."""
        return self.submit(config).result()

    def shutdown(self, wait: bool = True) -> None:
        """Lets queued jobs finish, closes the workers and joins their threads."""
        with self._lock:
            if self._shutdown:
                already = True
            else:
                already = False
                self._shutdown = True
        if not already:
            for _ in self._workers:
                self._jobs.put(_STOP)
        if wait:
            for w in self._workers:
                w.thread.join()

    def __enter__(self) -> "AsyncReplayExecutor":
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def __del__(self) -> None:
        # Best effort for scripts that forget shutdown(): stop the threads
        # without waiting so the interpreter can exit.
        try:
            if not self._shutdown:
                self.shutdown(wait=False)
        except Exception:
            pass
