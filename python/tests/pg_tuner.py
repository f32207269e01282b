"""One tuner process of the shared-study test: Optuna TPE over the vector-add
space, evaluating on the stand-in worker, telling a study in PostgreSQL.

Usage: pg_tuner.py STORAGE_URL STUDY RECORD_DB RESULTS_DIR N_TRIALS SEED OUT
Writes the hashes of the configurations it evaluated to OUT, one a line.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import optuna

from mneme.async_executor import AsyncReplayExecutor
from mneme.tuning.sample_strategy import OptunaSamplingStrategy

sys.path.insert(0, str(Path(__file__).parent))
from conftest import INSTANCE, STANDIN  # noqa: E402
from vecadd_space import VecAddSpace  # noqa: E402


def main() -> int:
    storage, study_name, record_db, results_dir, n_trials, seed, out = sys.argv[1:]
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.load_study(study_name=study_name, storage=storage,
                              sampler=optuna.samplers.TPESampler(seed=int(seed), n_startup_trials=5))
    evaluated = []
    with AsyncReplayExecutor(record_db, INSTANCE, 3, results_dir, 1,
                             worker_command=[sys.executable, str(STANDIN)]) as executor:
        for config, trial in OptunaSamplingStrategy(VecAddSpace(), study, int(n_trials)):
            result = executor.evaluate(config)
            evaluated.append(config.hash())
            penalty = 0 if config.passes == "default<O2>" else 50
            study.tell(trial, statistics.mean(result.exec_time) + penalty)
    Path(out).write_text("".join(h + "\n" for h in evaluated))
    return 0


if __name__ == "__main__":
    sys.exit(main())
