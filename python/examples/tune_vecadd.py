"""Exhaustive tuning of a recorded vector-add kernel through the Python API.

The space is the tuning example of the specification: blockDim.x from 64 to
1024 in steps of 64 (the grid shrinks so every element keeps its thread) times
five optimization pipelines, 80 configurations. Each is replayed on the
worker, verified and timed; the script prints one line per configuration,
the best one, and the throughput in configurations per second.

    python tune_vecadd.py --record-db RDB/<static-hash>.json --record-id <dynamic-hash>
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any, Mapping

from mneme.async_executor import AsyncReplayExecutor
from mneme.mneme_types import ExperimentConfiguration, ExperimentResult
from mneme.recorded_execution import RecordedExecution
from mneme.tuning.sample_strategy import ExhaustiveSamplingStrategy
from mneme.tuning.search_space import CategoricalParam, IntRangeParam, Param, SearchSpace

PIPELINES = ["default<O1>", "default<O2>", "default<O3>", "default<Os>", "default<Oz>"]


class BlockAndPipelineSpace(SearchSpace):
    """blockDim.x x pipeline, with the grid recomputed to cover the recorded threads."""

    def __init__(self, kernel: RecordedExecution.KernelInstance):
        self.kernel = kernel
        self.total_threads_x = kernel.grid_dim.x * kernel.block_dim.x

    def dimensions(self) -> Mapping[str, Param]:
        return {
            "block_dim_x": IntRangeParam("block_dim_x", 64, 1024, step=64),
            "passes": CategoricalParam("passes", PIPELINES),
        }

    def constraints(self, params: Mapping[str, Any]) -> bool:
        return params["block_dim_x"] * self.kernel.block_dim.y * self.kernel.block_dim.z <= 1024

    def derived(self, params: Mapping[str, Any]) -> ExperimentConfiguration:
        bx = params["block_dim_x"]
        k = self.kernel
        return ExperimentConfiguration.from_dict({
            "grid": {"x": -(-self.total_threads_x // bx), "y": k.grid_dim.y, "z": k.grid_dim.z},
            "block": {"x": bx, "y": k.block_dim.y, "z": k.block_dim.z},
            "shared_mem": k.shared_mem,
            "passes": params["passes"],
        })

    def baseline(self) -> ExperimentConfiguration:
        k = self.kernel
        return ExperimentConfiguration.from_dict(
            {"grid": k.grid_dim.to_dict(), "block": k.block_dim.to_dict(), "shared_mem": k.shared_mem})


def timed_mean(result: ExperimentResult, iterations: int) -> float:
    # Rank on the timed launches (the last `iterations` samples).
    return statistics.mean(result.exec_time[-iterations:])


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--record-db", required=True, help="the kernel's JSON file in the recording database")
    ap.add_argument("--record-id", help="instance (dynamic hash); default: the only or first one")
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--gpus", help="comma-separated devices, worker i on the i-th (default 0..workers-1)")
    ap.add_argument("--results-dir", default="mneme-results")
    ap.add_argument("--quiet", action="store_true", help="no line per configuration")
    args = ap.parse_args(argv)

    recording = RecordedExecution.from_json(args.record_db)
    record_id = args.record_id or next(iter(recording))
    space = BlockAndPipelineSpace(recording[record_id])
    configs = [c for c in ExhaustiveSamplingStrategy(space) if c.is_valid()]
    gpus = [int(g) for g in args.gpus.split(",")] if args.gpus else None

    with AsyncReplayExecutor(args.record_db, record_id, args.iterations, args.results_dir, args.workers,
                             warmup=args.warmup, gpus=gpus) as executor:
        base = executor.evaluate(space.baseline())
        if not base.verified:
            print(f"baseline did not verify: {base.status} {base.error}")
            return 1
        base_time = timed_mean(base, args.iterations)
        print(f"baseline: block {space.kernel.block_dim.x} mean {base_time:.0f} ns")

        start = time.perf_counter()
        # Submitting everything first keeps every worker busy; with one
        # worker it is the same as evaluating one by one.
        futures = [(c, executor.submit(c)) for c in configs]
        verified: list[tuple[ExperimentConfiguration, float]] = []
        for i, (config, future) in enumerate(futures):
            result = future.result()
            if result.verified:
                mean = timed_mean(result, args.iterations)
                verified.append((config, mean))
                line = f"mean {mean:.0f} ns speedup {base_time / mean:.3f}"
            else:
                line = f"{result.status}: {result.error}"
            if not args.quiet:
                print(f"[{i}] block {config.block.x} {config.passes}: {line}")
        elapsed = time.perf_counter() - start

    print(f"{len(configs)} configurations in {elapsed:.2f} s: {len(configs) / elapsed:.1f} configurations/s "
          f"({args.workers} worker(s))")
    if not verified:
        print("no configuration verified")
        return 2
    best, best_time = min(verified, key=lambda cv: cv[1])
    print(f"BEST: block {best.block.x} {best.passes} mean {best_time:.0f} ns speedup {base_time / best_time:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
