"""Optuna TPE tuning of a recorded vector-add kernel, on one or more workers.

Same space as tune_vecadd.py. Trials are asked from an Optuna study (any
storage URL: SQLite, PostgreSQL, ...); with several workers, as many trials
are in flight as there are workers, and each is told when its replay ends.

    python tune_vecadd_optuna.py --record-db RDB/<sh>.json --trials 40 [--workers 2 --gpus 0,1] \
        [--storage sqlite:///study.db --study vecadd]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import Any

import optuna

from mneme.async_executor import AsyncReplayExecutor
from mneme.mneme_types import ExperimentResult
from mneme.recorded_execution import RecordedExecution
from mneme.tuning.sample_strategy import OptunaSamplingStrategy
from tune_vecadd import BlockAndPipelineSpace


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--record-db", required=True)
    ap.add_argument("--record-id")
    ap.add_argument("--trials", type=int, required=True)
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--gpus")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--storage", help="Optuna storage URL (default: in memory)")
    ap.add_argument("--study", default="vecadd")
    ap.add_argument("--results-dir", default="mneme-results")
    args = ap.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)

    recording = RecordedExecution.from_json(args.record_db)
    record_id = args.record_id or next(iter(recording))
    space = BlockAndPipelineSpace(recording[record_id])
    study = optuna.create_study(study_name=args.study, storage=args.storage, load_if_exists=True,
                                direction="minimize", sampler=optuna.samplers.TPESampler(seed=args.seed))
    gpus = [int(g) for g in args.gpus.split(",")] if args.gpus else None

    def objective(result: ExperimentResult) -> float:
        return statistics.mean(result.exec_time[-args.iterations:]) if result.verified else float("inf")

    def tell(future: "Future[ExperimentResult]", trial: Any) -> None:
        try:
            study.tell(trial, objective(future.result()))
        except RuntimeError as e:  # the worker crashed on this configuration
            print(f"trial {trial.number}: {e}")
            study.tell(trial, state=optuna.trial.TrialState.FAIL)

    evaluated = 0
    with AsyncReplayExecutor(args.record_db, record_id, args.iterations, args.results_dir, args.workers,
                             warmup=args.warmup, gpus=gpus) as executor:
        base = executor.evaluate(space.baseline())
        if not base.verified:
            print(f"baseline did not verify: {base.status} {base.error}")
            return 1
        base_time = objective(base)
        start = time.perf_counter()
        in_flight: dict[Future[ExperimentResult], Any] = {}
        for config, trial in OptunaSamplingStrategy(space, study, args.trials):
            in_flight[executor.submit(config)] = trial
            evaluated += 1
            if len(in_flight) >= args.workers:
                done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
                for f in done:
                    tell(f, in_flight.pop(f))
        for f in list(in_flight):
            tell(f, in_flight.pop(f))
        elapsed = time.perf_counter() - start

    print(f"{args.trials} trials ({evaluated} replayed, the rest duplicates) in {elapsed:.2f} s: "
          f"{evaluated / elapsed:.1f} configurations/s ({args.workers} worker(s))")
    if not any(t.state == optuna.trial.TrialState.COMPLETE and t.value != float("inf") for t in study.trials):
        print("no configuration verified")
        return 2
    best = study.best_trial
    print(f"BEST: {best.params} mean {best.value:.0f} ns speedup {base_time / best.value:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
