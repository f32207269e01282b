"""optuna-dashboard shows the studies our tuner writes into an Optuna storage
(mneme tune --optuna-storage, mneme optimize --optuna-storage): its server,
driven through WSGI as a browser's requests would, lists the study by name
with its trials and their states."""

import io
import json
from pathlib import Path
from typing import Any
from wsgiref.util import setup_testing_defaults

import pytest

from test_propose import converse


def get(app: Any, path: str) -> Any:
    environ: dict[str, Any] = {}
    setup_testing_defaults(environ)
    environ["PATH_INFO"], environ["QUERY_STRING"] = (path.split("?", 1) + [""])[:2]
    environ["wsgi.input"] = io.BytesIO()
    status: list[str] = []
    body = b"".join(app(environ, lambda s, h, exc=None: status.append(s)))
    assert status and status[0].startswith("200"), f"GET {path}: {status}"
    return json.loads(body)


def test_the_dashboard_lists_a_tuned_kernels_study(tmp_path: Path) -> None:
    pytest.importorskip("optuna")
    dashboard = pytest.importorskip("optuna_dashboard")
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    params = [{"name": "block_x", "kind": "int", "low": 64, "high": 1024, "step": 64},
              {"name": "passes", "kind": "pipeline", "choices": ["default<O2>", "default<O3>"]}]
    reqs: list[dict[str, Any] | str] = [{"op": "open", "params": params, "sampler": "tpe", "trials": 5, "seed": 3,
                                         "study_name": "vecadd-c24960d9", "optuna_storage": storage}]
    for i in range(1, 6):
        reqs += [{"op": "ask"}, {"op": "tell", "id": i, "loss": 2000.0 - i} if i != 4 else {"op": "tell", "id": i, "status": "runtime_error"}]
    converse(reqs)

    app = dashboard.wsgi(storage)
    studies = get(app, "/api/studies")["study_summaries"]
    assert [s["study_name"] for s in studies] == ["vecadd-c24960d9"]
    study = get(app, f"/api/studies/{studies[0]['study_id']}?after=0")
    assert study["name"] == "vecadd-c24960d9"
    states = sorted(t["state"] for t in study["trials"])
    assert states == ["Complete"] * 4 + ["Fail"], states
    best = study["best_trials"]
    assert len(best) == 1 and best[0]["values"] == [1995.0]
    assert {p["name"] for p in best[0]["params"]} == {"block_x", "passes"}
