"""Two tuner processes share one Optuna study stored in a real PostgreSQL server.

The test starts a throwaway cluster (initdb + pg_ctl in a temporary folder,
listening on a free port of 127.0.0.1; as an unprivileged user when run as
root, since PostgreSQL refuses to run as root) and stops it afterwards.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from conftest import write_recording

TESTS = Path(__file__).parent


def postgres_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    # Debian keeps the server binaries off PATH, per major version.
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(p.split("/")[4]))
    return candidates[-1] if candidates else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def unprivileged_user() -> str | None:
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    return None


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    initdb, pg_ctl = postgres_bin("initdb"), postgres_bin("pg_ctl")
    if not initdb or not pg_ctl:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) not found: install the Debian package postgresql")
    pytest.importorskip("psycopg", reason="psycopg is not installed: pip install 'psycopg[binary]'")
    prefix: list[str] = []
    root = tempfile.mkdtemp(prefix="mneme-pg-")
    if os.geteuid() == 0:
        user = unprivileged_user()
        runuser = shutil.which("runuser")
        if not user or not runuser:
            pytest.skip("running as root without runuser or an unprivileged user (postgres, nobody) for PostgreSQL")
        prefix = [runuser, "-u", user, "--"]
        entry = pwd.getpwnam(user)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    data = os.path.join(root, "data")
    port = free_port()

    def run(args: list[str]) -> None:
        proc = subprocess.run(prefix + args, cwd=root, capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")

    try:
        run([initdb, "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"])
        run([pg_ctl, "-D", data, "-l", os.path.join(root, "server.log"), "-w", "-t", "60",
             "-o", f"-p {port} -h 127.0.0.1 -k {root} -c fsync=off", "start"])
        try:
            yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
        finally:
            run([pg_ctl, "-D", data, "-m", "immediate", "-w", "stop"])
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_two_tuners_share_one_study(postgres_url: str, tmp_path: Path) -> None:
    import optuna

    record_db = write_recording(tmp_path / "rdb")
    optuna.create_study(study_name="vecadd-shared", storage=postgres_url, direction="minimize")
    n_trials = 30
    procs = []
    for i, seed in enumerate((11, 12)):
        out = tmp_path / f"evaluated-{i}"
        cmd = [sys.executable, str(TESTS / "pg_tuner.py"), postgres_url, "vecadd-shared", str(record_db),
               str(tmp_path / f"results-{i}"), str(n_trials), str(seed), str(out)]
        procs.append((subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True), out))
    for proc, _ in procs:
        output, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, output
    evaluated = [h for _, out in procs for h in out.read_text().split()]
    study = optuna.load_study(study_name="vecadd-shared", storage=postgres_url)
    # Every ask of both processes is a trial of the one study ...
    assert len(study.trials) == 2 * n_trials
    # ... and no configuration was evaluated twice, across the two processes.
    assert len(evaluated) == len(set(evaluated)) > 10
    complete = study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    assert sorted(t.user_attrs["mneme_config_hash"] for t in complete) == sorted(evaluated)
    assert len(complete) + len(study.get_trials(states=(optuna.trial.TrialState.PRUNED,))) == 2 * n_trials
