"""`mneme tune` with Mneme's command line and config.yml, over the Python API.

Run as `mneme-tune`, `python -m mneme.cli.tune`, or `mneme tune` (the Go
command hands Mneme's spellings to this module). Options come from the
built-in defaults, then --config (JSON or YAML; a nested `search:` mapping is
flattened), then the command line, which wins.

Exit codes: 0 done, 1 the baseline did not verify, 3 invalid configuration,
4 the recording could not be loaded, 5 internal error.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import logging
import math
import os
import statistics
import sys
import time
from concurrent.futures import Future
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator, Literal, Mapping, NoReturn, Sequence

from ..async_executor import AsyncReplayExecutor, WorkerCrashedError
from ..mneme_types import ExperimentConfiguration, ExperimentResult
from ..recorded_execution import KernelInstance, RecordedExecution
from ..tuning.sample_strategy import ExhaustiveSamplingStrategy, OptunaSamplingStrategy, RandomSamplingStrategy
from ..tuning.search_space import Param, SearchSpace
from .builtin_space import (
    BOOL_MODES,
    LAUNCH_DIMS,
    MAX_THREADS_POLICIES,
    PRESETS,
    SAFETIES,
    BuiltinSpace,
    default_safety,
)

EXIT_OK = 0
EXIT_BASELINE = 1
EXIT_CONFIG = 3
EXIT_RECORD = 4
EXIT_INTERNAL = 5

SAMPLERS = ("random", "tpe", "grid", "exhaustive")
METRICS = ("mean", "median", "min", "max")
OBJECTIVES = ("time", "speedup")
PRUNERS = ("none", "median", "percentile", "hyperband", "successive-halving", "threshold")

DEFAULTS: dict[str, Any] = {
    "sampler": "random",
    "trials": None,
    "workers": 1,
    "iterations": 5,
    "warmup": 2,
    "metric": "mean",
    "objective": "time",
    "seed": None,
    "timeout": None,
    "space_module": None,
    "space_arg": [],
    "space_preset": "standard",
    "launch_dim": None,
    "launch_safety": None,
    "adaptive_invalid_ban": True,
    "passes": None,
    "fixed_passes": None,
    "pipeline_file": None,
    "codegen_opt_range": None,
    "fixed_codegen_opt": None,
    "specialize_space": None,
    "specialize_dims_space": None,
    "launch_bounds_space": None,
    "max_threads_policy": "block-threads",
    "max_threads_range": None,
    "min_blocks_per_sm_range": None,
    "fail_fast": False,
    "results_dir": None,
    "resume": False,
    "rerun_baseline": False,
    "print_space": False,
    "dry_run": False,
    "baseline_only": False,
    "dump_config": None,
    "quiet": False,
    "study_name": None,
    "optuna_storage": None,
    "pruner": "none",
    "proteus_output": None,
    "no_proteus_output": False,
    "record_database": None,
    "record_id": None,
}

# Run-mode keys that a --config file may not set: they act on one invocation.
_NOT_IN_CONFIG = {"config", "dump_config", "print_space", "dry_run", "baseline_only"}


class ConfigError(Exception):
    """An invalid option; the message names the flag or key."""


class _Parser(argparse.ArgumentParser):
    """argparse with Mneme's exit code for a bad command line."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_CONFIG, f"{self.prog}: error: {message}\n")


def _positive(value: str) -> int:
    n = _int(value)
    if n < 1:
        raise argparse.ArgumentTypeError(f"want an integer >= 1, got {value!r}")
    return n


def _non_negative(value: str) -> int:
    n = _int(value)
    if n < 0:
        raise argparse.ArgumentTypeError(f"want an integer >= 0, got {value!r}")
    return n


def _int(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"want an integer, got {value!r}") from None


def _seconds(value: str) -> float:
    try:
        s = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"want seconds, got {value!r}") from None
    if not s > 0:
        raise argparse.ArgumentTypeError(f"want positive seconds, got {value!r}")
    return s


def _int_range(value: str) -> tuple[int, int, int]:
    """LO:HI or LO:HI:STEP (LO-HI too), inclusive."""
    text = str(value).strip()
    parts = text.split(":") if ":" in text else text.split("-")
    try:
        nums = [int(p) for p in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(f"want LO:HI or LO:HI:STEP, got {value!r}") from None
    if len(nums) == 1:
        nums = [nums[0], nums[0]]
    if len(nums) not in (2, 3) or nums[0] > nums[1] or (len(nums) == 3 and nums[2] < 1):
        raise argparse.ArgumentTypeError(f"want LO:HI or LO:HI:STEP with LO <= HI, got {value!r}")
    return nums[0], nums[1], nums[2] if len(nums) == 3 else 1


def _space_arg(value: str) -> str:
    if "=" not in value or not value.split("=", 1)[0]:
        raise argparse.ArgumentTypeError(f"want KEY=VALUE, got {value!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser; every option defaults to absent so --config can fill it."""
    p = _Parser(prog="mneme tune", argument_default=argparse.SUPPRESS,
                description="Tune one recorded kernel instance (Mneme's command line).")
    g = p.add_argument_group("input")
    g.add_argument("--config", metavar="FILE", help="options from a JSON or YAML file; the command line wins")
    g.add_argument("--record-database", "--record-db", dest="record_database", metavar="FILE",
                   help="the recording database: a kernel's JSON file (required)")
    g.add_argument("--record-id", "-rid", dest="record_id", metavar="ID",
                   help="dynamic hash of the instance (required)")

    g = p.add_argument_group("search space")
    g.add_argument("--space-module", metavar="MODULE_OR_PATH:CLASS",
                   help="a SearchSpace class, constructed with the recorded kernel instance")
    g.add_argument("--space-arg", action="append", type=_space_arg, metavar="KEY=VALUE",
                   help="keyword argument for the class (VALUE read as JSON when it parses); repeatable")
    g.add_argument("--space-preset", choices=PRESETS, help="built-in space (default standard)")
    g.add_argument("--launch-dim", choices=LAUNCH_DIMS, help="block axes the built-in space varies")
    g.add_argument("--launch-safety", choices=SAFETIES,
                   help="how far block shapes stray from the recording (default by preset)")
    g.add_argument("--adaptive-invalid-ban", action=argparse.BooleanOptionalAction,
                   help="skip a block shape once it failed to launch (default on)")
    g.add_argument("--passes", nargs="+", metavar="PIPELINE", help="pipelines to choose from")
    g.add_argument("--fixed-passes", metavar="PIPELINE", help="one pipeline for every trial")
    g.add_argument("--pipeline-file", metavar="FILE", help="pipelines to choose from, one per line")
    g.add_argument("--codegen-opt-range", type=_int_range, metavar="LO:HI", help="codegen levels to try")
    g.add_argument("--fixed-codegen-opt", type=_non_negative, metavar="N", help="one codegen level")
    for name, what in (("specialize", "argument specialization"), ("specialize-dims", "launch-dimension specialization"),
                       ("launch-bounds", "launch bounds")):
        g.add_argument(f"--{name}-space", choices=BOOL_MODES, help=f"{what}: fixed, on, off or on-off")
    g.add_argument("--max-threads-policy", choices=MAX_THREADS_POLICIES, help="max_threads with launch bounds on")
    g.add_argument("--max-threads-range", type=_int_range, metavar="LO:HI[:STEP]", help="max_threads values to try")
    g.add_argument("--min-blocks-per-sm-range", type=_int_range, metavar="LO:HI[:STEP]",
                   help="min_blocks_per_sm values to try")

    g = p.add_argument_group("sampling and evaluation")
    g.add_argument("--sampler", choices=SAMPLERS, help="random (default), tpe, grid or exhaustive")
    g.add_argument("--trials", type=_positive, help="candidates to evaluate (random and tpe only; required there)")
    g.add_argument("--seed", type=_int, help="seed of the random and tpe samplers")
    g.add_argument("--timeout", type=_seconds, metavar="SECONDS", help="stop submitting candidates after this long")
    g.add_argument("--workers", type=_positive, help="concurrent replay workers (default 1)")
    g.add_argument("--iterations", type=_positive, help="measured launches per candidate (default 5)")
    g.add_argument("--warmup", type=_non_negative, help="warmup launches per candidate (default 2)")
    g.add_argument("--metric", choices=METRICS, help="statistic of the measured launches (default mean)")
    g.add_argument("--objective", choices=OBJECTIVES, help="minimize time (default) or maximize speedup")
    g.add_argument("--fail-fast", dest="fail_fast", action="store_true", help="stop at the first failed candidate")
    g.add_argument("--keep-going", dest="fail_fast", action="store_false", help="go on past failed candidates (default)")

    g = p.add_argument_group("outputs and run modes")
    g.add_argument("--results-dir", metavar="DIR", help="results folder (default mneme-tune-results/<timestamp>)")
    g.add_argument("--resume", action="store_true", help="continue the run in --results-dir, skipping done candidates")
    g.add_argument("--rerun-baseline", action="store_true", help="with --resume, replay the baseline again")
    g.add_argument("--print-space", action="store_true", help="print the search space as JSON and exit")
    g.add_argument("--dry-run", action="store_true", help="print the baseline and the search space, replay nothing")
    g.add_argument("--baseline-only", action="store_true", help="replay the baseline only")
    g.add_argument("--dump-config", metavar="PATH", help="write the resolved configuration to PATH and exit")
    g.add_argument("--quiet", action="store_true", help="no progress output")

    g = p.add_argument_group("Optuna and Proteus")
    g.add_argument("--study-name", metavar="NAME", help="Optuna study name (tpe)")
    g.add_argument("--optuna-storage", metavar="URL", help="Optuna storage URL, e.g. sqlite:///study.db (tpe)")
    g.add_argument("--pruner", choices=PRUNERS, help="Optuna pruner of the study (tpe; default none)")
    g.add_argument("--proteus-output", metavar="FILE", help="where to write Proteus tuned-kernel metadata")
    g.add_argument("--no-proteus-output", action="store_true", help="write no Proteus metadata")
    return p


def _load_config_file(path: str) -> dict[str, Any]:
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ConfigError(f"--config {path}: {e.strerror or e}") from None
    doc: Any
    try:
        doc = json.loads(text)
    except ValueError:
        try:
            import yaml
        except ImportError:
            raise ConfigError(f"--config {path}: not JSON, and PyYAML is not installed to read YAML") from None
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise ConfigError(f"--config {path}: {e}") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise ConfigError(f"--config {path}: want a mapping of option to value")
    flat: dict[str, Any] = {}
    for key, value in doc.items():
        if key == "search":
            if not isinstance(value, dict):
                raise ConfigError(f"--config {path}: 'search' must be a mapping")
            flat.update(value)
        else:
            flat[key] = value
    out = {str(k).replace("-", "_"): v for k, v in flat.items()}
    # keep_going is the negative spelling of fail_fast, as on the command line.
    if "keep_going" in out:
        keep = out.pop("keep_going")
        out["fail_fast"] = (not keep) if isinstance(keep, bool) else keep
    return out


def _coerce_config(parser: argparse.ArgumentParser, cfg: Mapping[str, Any], path: str) -> dict[str, Any]:
    """Checks and converts config-file values as the matching flag would."""
    actions = {a.dest: a for a in parser._actions if a.dest != "help"}
    out: dict[str, Any] = {}
    for key, value in cfg.items():
        action = actions.get(key)
        if action is None and key == "no_proteus_output":
            action = actions["no_proteus_output"]
        if action is None or key in _NOT_IN_CONFIG:
            raise ConfigError(f"--config {path}: unknown key {key!r}")
        where = f"--config {path}: {key}"
        if value is None:
            out[key] = None
            continue
        if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse.BooleanOptionalAction)):
            if not isinstance(value, bool):
                raise ConfigError(f"{where}: want true or false, got {value!r}")
            out[key] = value
            continue
        if action.nargs in ("+", "*") or isinstance(action, argparse._AppendAction):
            items = value if isinstance(value, list) else [value]
            if isinstance(action, argparse._AppendAction) and isinstance(value, dict):
                items = [f"{k}={json.dumps(v)}" for k, v in value.items()]
            out[key] = [_convert(action, str(v), where) for v in items]
            continue
        if isinstance(value, (list, dict)):
            raise ConfigError(f"{where}: want a single value, got {value!r}")
        text = str(value).lower() if isinstance(value, bool) else str(value)
        out[key] = _convert(action, text, where)
    return out


def _convert(action: argparse.Action, text: str, where: str) -> Any:
    value: Any = text
    if action.type is not None:
        try:
            value = action.type(text)  # type: ignore[operator]
        except argparse.ArgumentTypeError as e:
            raise ConfigError(f"{where}: {e}") from None
    if action.choices is not None and value not in action.choices:
        raise ConfigError(f"{where}: {value!r} is not one of {', '.join(map(str, action.choices))}")
    return value


def resolve_options(argv: Sequence[str]) -> dict[str, Any]:
    """Defaults, then --config, then the command line; checked for consistency."""
    parser = build_parser()
    cli = vars(parser.parse_args(list(argv)))
    opts = dict(DEFAULTS)
    config_path = cli.pop("config", None)
    if config_path:
        opts.update(_coerce_config(parser, _load_config_file(config_path), config_path))
    opts.update(cli)
    opts["config"] = config_path
    _check(opts)
    return opts


def _check(o: dict[str, Any]) -> None:
    if o["sampler"] in ("random", "tpe"):
        if o["trials"] is None:
            raise ConfigError(f"--trials is required with --sampler {o['sampler']}")
    elif o["trials"] is not None:
        raise ConfigError(f"--trials does not apply to --sampler {o['sampler']}: it enumerates the whole space")
    if o["sampler"] != "tpe":
        for key in ("study_name", "optuna_storage"):
            if o[key] is not None:
                raise ConfigError(f"--{key.replace('_', '-')} needs --sampler tpe")
        if o["pruner"] != "none":
            raise ConfigError("--pruner needs --sampler tpe")
    if o["space_module"] is not None:
        builtin_only = ["passes", "fixed_passes", "pipeline_file", "codegen_opt_range", "fixed_codegen_opt",
                        "launch_dim", "launch_safety", "specialize_space", "specialize_dims_space",
                        "launch_bounds_space", "max_threads_range", "min_blocks_per_sm_range"]
        for key in builtin_only:
            if o[key] is not None:
                raise ConfigError(f"--{key.replace('_', '-')} shapes the built-in space; it does not apply with --space-module")
        if ":" not in str(o["space_module"]):
            raise ConfigError(f"--space-module {o['space_module']!r}: want MODULE_OR_PATH:CLASS")
    chosen = [k for k in ("passes", "fixed_passes", "pipeline_file") if o[k] is not None]
    if len(chosen) > 1:
        raise ConfigError("--passes, --fixed-passes and --pipeline-file exclude each other; got "
                          + ", ".join("--" + k.replace("_", "-") for k in chosen))
    if o["codegen_opt_range"] is not None and o["fixed_codegen_opt"] is not None:
        raise ConfigError("--codegen-opt-range and --fixed-codegen-opt exclude each other")
    if o["rerun_baseline"] and not o["resume"]:
        raise ConfigError("--rerun-baseline needs --resume")
    if o["proteus_output"] is not None and o["no_proteus_output"]:
        raise ConfigError("--proteus-output and --no-proteus-output exclude each other")
    if o["dump_config"] is None:
        for key in ("record_database", "record_id"):
            if not o[key]:
                raise ConfigError(f"--{key.replace('_', '-')} is required")


def _jsonable(o: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in o.items():
        if k in _NOT_IN_CONFIG:
            continue
        if isinstance(v, tuple):
            v = ":".join(str(x) for x in v)
        out[k] = v
    return out


def _dump_config(opts: Mapping[str, Any], path: str) -> None:
    doc = _jsonable(opts)
    if path.endswith((".yml", ".yaml")):
        import yaml

        text = yaml.safe_dump(doc, sort_keys=False)
    else:
        text = json.dumps(doc, indent=2) + "\n"
    if path == "-":
        sys.stdout.write(text)
    else:
        Path(path).write_text(text)


# -- search space -------------------------------------------------------------


def _load_space_class(spec: str) -> type:
    target, _, cls_name = spec.rpartition(":")
    try:
        if target.endswith(".py") or os.sep in target or Path(target).is_file():
            path = Path(target)
            if not path.is_file():
                raise ConfigError(f"--space-module {spec}: no file {target}")
            name = f"mneme_user_space_{abs(hash(str(path.resolve())))}"
            mod_spec = importlib.util.spec_from_file_location(name, path)
            if mod_spec is None or mod_spec.loader is None:
                raise ConfigError(f"--space-module {spec}: cannot load {target}")
            module = importlib.util.module_from_spec(mod_spec)
            sys.modules[name] = module
            # The user's file may import its neighbours.
            sys.path.insert(0, str(path.resolve().parent))
            mod_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(target)
    except ConfigError:
        raise
    except Exception as e:
        raise ConfigError(f"--space-module {spec}: loading {target} failed: {type(e).__name__}: {e}") from None
    cls = getattr(module, cls_name, None)
    if not isinstance(cls, type) or not issubclass(cls, SearchSpace):
        raise ConfigError(f"--space-module {spec}: {cls_name} is not a SearchSpace class in {target}")
    return cls


def _space_kwargs(items: Sequence[str]) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    for item in items:
        key, _, text = item.partition("=")
        try:
            kwargs[key] = json.loads(text)
        except ValueError:
            kwargs[key] = text
    return kwargs


def build_space(o: Mapping[str, Any], kernel: KernelInstance) -> SearchSpace:
    """The user's class from --space-module, else the built-in space of the flags."""
    if o["space_module"]:
        cls = _load_space_class(str(o["space_module"]))
        try:
            space = cls(kernel, **_space_kwargs(o["space_arg"]))
        except Exception as e:
            raise ConfigError(f"--space-module {o['space_module']}: constructing {cls.__name__} failed: {e}") from None
        return space  # type: ignore[no-any-return]
    passes: list[str] | None = None
    if o["passes"]:
        passes = list(o["passes"])
    elif o["fixed_passes"]:
        passes = [o["fixed_passes"]]
    elif o["pipeline_file"]:
        try:
            lines = Path(o["pipeline_file"]).read_text().splitlines()
        except OSError as e:
            raise ConfigError(f"--pipeline-file {o['pipeline_file']}: {e.strerror or e}") from None
        passes = [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
        if not passes:
            raise ConfigError(f"--pipeline-file {o['pipeline_file']}: no pipelines in it")
    codegen: list[int] | None = None
    if o["codegen_opt_range"] is not None:
        lo, hi, step = o["codegen_opt_range"]
        codegen = list(range(lo, hi + 1, step))
    elif o["fixed_codegen_opt"] is not None:
        codegen = [o["fixed_codegen_opt"]]
    return BuiltinSpace(
        kernel, preset=o["space_preset"], launch_dim=o["launch_dim"],
        launch_safety=o["launch_safety"] or default_safety(o["space_preset"]),
        passes=passes, codegen_opt=codegen, specialize=o["specialize_space"],
        specialize_dims=o["specialize_dims_space"], launch_bounds=o["launch_bounds_space"],
        max_threads_policy=o["max_threads_policy"], max_threads_range=o["max_threads_range"],
        min_blocks_per_sm_range=o["min_blocks_per_sm_range"])


def _describe_param(p: Param) -> dict[str, Any]:
    d: dict[str, Any] = {"type": type(p).__name__}
    for k, v in vars(p).items():
        if isinstance(v, range):
            v = list(v)
        elif isinstance(v, tuple):
            v = list(v)
        try:
            json.dumps(v)
        except (TypeError, ValueError):
            v = repr(v)
        d[k] = v
    size = p.size()
    d["size"] = size if math.isfinite(size) else None
    return d


def describe_space(o: Mapping[str, Any], space: SearchSpace) -> dict[str, Any]:
    """search_space.json: where the space comes from and each dimension."""
    dims = space.dimensions()
    size = 1.0
    for p in dims.values():
        size *= p.size()
    return {
        "source": "module" if o["space_module"] else "builtin",
        "space_module": o["space_module"],
        "space_args": _space_kwargs(o["space_arg"]),
        "space_preset": None if o["space_module"] else o["space_preset"],
        "class": type(space).__name__,
        "dimensions": {name: _describe_param(p) for name, p in dims.items()},
        "size": size if math.isfinite(size) else None,
        "baseline": space.baseline().to_dict(),
    }


# -- trials -------------------------------------------------------------------

_STATUS_COUNTS = {
    "failed_verification": "num_failed_verification",
    "invalid_launch": "num_invalid_launch",
    "compile_error": "num_compile_error",
    "runtime_error": "num_runtime_error",
    "invalid_config": "num_invalid_config",
    "internal_error": "num_internal_error",
}


def classify(result: ExperimentResult) -> str:
    """One of Mneme's trial statuses for a result."""
    if result.verified and not result.failed:
        return "verified"
    if result.status in _STATUS_COUNTS:
        return result.status
    if result.status in ("crashed", "timeout"):
        return "runtime_error"
    if result.executed and not result.failed:
        return "failed_verification"
    return "internal_error"


def metric_of(result: ExperimentResult, metric: str, iterations: int) -> float | None:
    """The metric over the measured launches (the samples after warmup)."""
    samples = list(result.exec_time)[-iterations:]
    if not samples:
        return None
    stats: dict[str, Callable[[list[float]], float]] = {
        "mean": statistics.mean, "median": statistics.median, "min": min, "max": max}
    return float(stats[metric](samples))


class Tuner:
    """One run: baseline, candidates, results files."""

    def __init__(self, o: dict[str, Any], kernel: KernelInstance, space: SearchSpace, out: Path, log: logging.Logger):
        self.o = o
        self.kernel = kernel
        self.space = space
        self.out = out
        self.log = log
        self.counts = {v: 0 for v in _STATUS_COUNTS.values()}
        self.num_verified = 0
        self.num_completed = 0
        self.best: dict[str, Any] | None = None
        self.baseline_metric: float | None = None
        self.done_hashes: set[str] = set()
        self.next_trial = 0
        self.stopped = ""

    def say(self, text: str) -> None:
        self.log.info(text)
        if not self.o["quiet"]:
            print(text, flush=True)

    def value(self, metric: float) -> float:
        """The objective's value: time to minimize or speedup to maximize."""
        if self.o["objective"] == "speedup":
            assert self.baseline_metric is not None
            return self.baseline_metric / metric if metric > 0 else 0.0
        return metric

    def better(self, metric: float) -> bool:
        best = self.best["metric"] if self.best else self.baseline_metric
        return best is None or metric < best

    def record(self, trial: int, params: Mapping[str, Any], config: ExperimentConfiguration | None,
               result: ExperimentResult | None, status: str, error: str = "", **extra: Any) -> dict[str, Any]:
        metric = metric_of(result, self.o["metric"], self.o["iterations"]) if result is not None and status == "verified" else None
        speedup = self.baseline_metric / metric if metric and self.baseline_metric else None
        rec: dict[str, Any] = {
            "trial": trial, "status": status, "params": dict(params),
            "config": config.to_dict() if config is not None else None,
            "config_hash": config.hash() if config is not None else None,
            "metric": metric, "speedup": speedup,
            "value": self.value(metric) if metric is not None else None,
            "error": error or (result.error if result is not None else ""),
            "result": result.to_dict() if result is not None else None,
        }
        rec.update(extra)
        self.num_completed += 1
        if status == "verified":
            self.num_verified += 1
            if metric is not None and self.better(metric):
                self.best = rec
        else:
            self.counts[_STATUS_COUNTS.get(status, "num_internal_error")] += 1
        with open(self.out / "trials.jsonl", "a") as f:
            f.write(json.dumps(rec) + "\n")
            f.flush()
            os.fsync(f.fileno())
        shown = f"metric={metric:.6g} speedup={speedup:.4g}" if metric is not None and speedup else (rec["error"] or "")
        self.say(f"[{trial}] {status} {json.dumps(dict(params), sort_keys=True)} {shown}".rstrip())
        return rec

    def resume_from(self) -> None:
        path = self.out / "trials.jsonl"
        if not path.exists():
            return
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            rec = json.loads(line)
            self.next_trial = max(self.next_trial, int(rec["trial"]) + 1)
            if rec.get("config_hash"):
                self.done_hashes.add(rec["config_hash"])
            self.num_completed += 1
            status = rec["status"]
            if status == "verified":
                self.num_verified += 1
                if rec.get("metric") is not None and self.better(rec["metric"]):
                    self.best = rec
            else:
                self.counts[_STATUS_COUNTS.get(status, "num_internal_error")] += 1

    def candidates(self, study: Any) -> Iterator[tuple[dict[str, Any], ExperimentConfiguration | None, Any]]:
        """(params, config or None when derived() failed, Optuna trial or None)."""
        sampler = self.o["sampler"]
        if sampler in ("grid", "exhaustive"):
            strat = ExhaustiveSamplingStrategy(self.space)
            for params in strat.points():
                yield params, self._derive(params), None
        elif sampler == "random":
            for item in RandomSamplingStrategy(self.space, self.o["trials"], seed=self.o["seed"]):
                yield item["parameters"], item["config"], None
        else:
            dims = self.space.dimensions()
            for config, trial in OptunaSamplingStrategy(self.space, study, self.o["trials"]):
                # Fixed dimensions are not asked of Optuna, so trial.params lacks them.
                params = {name: trial.params[name] if name in trial.params else getattr(p, "value", None)
                          for name, p in dims.items()}
                yield params, config, trial

    def _derive(self, params: Mapping[str, Any]) -> ExperimentConfiguration | None:
        try:
            config = self.space.derived(params)
        except Exception as e:
            self.log.info("derived(%s) failed: %s", dict(params), e)
            return None
        return config if isinstance(config, ExperimentConfiguration) else None

    def run_candidates(self, executor: Any, study: Any) -> None:
        import optuna

        start = time.monotonic()
        pending: list[tuple[int, dict[str, Any], ExperimentConfiguration, Any, Future[ExperimentResult]]] = []
        ban = self.o["adaptive_invalid_ban"]
        banned: set[tuple[int, int, int]] = set()

        def finish(entry: tuple[int, dict[str, Any], ExperimentConfiguration, Any, Future[ExperimentResult]]) -> None:
            trial_no, params, config, otrial, fut = entry
            try:
                result = fut.result()
            except WorkerCrashedError as e:
                # The candidate took its worker down (a fault in the replayed code).
                result = ExperimentResult.failure("runtime_error", str(e))
            except Exception as e:
                result = ExperimentResult.failure("internal_error", f"{type(e).__name__}: {e}")
            status = classify(result)
            rec = self.record(trial_no, params, config, result, status)
            if status == "invalid_launch" and ban:
                banned.add((config.block.x, config.block.y, config.block.z))
                if isinstance(self.space, BuiltinSpace) and "block_shape" in params:
                    self.space.banned.add(params["block_shape"])
            if otrial is not None:
                if rec["value"] is not None:
                    study.tell(otrial, rec["value"])
                else:
                    study.tell(otrial, state=optuna.trial.TrialState.FAIL)
            if status != "verified" and self.o["fail_fast"]:
                self.stopped = "fail_fast"

        def drain(keep: int) -> None:
            while len(pending) > keep:
                finish(pending.pop(0))

        for params, config, otrial in self.candidates(study):
            if self.stopped:
                if otrial is not None:
                    study.tell(otrial, state=optuna.trial.TrialState.FAIL)
                break
            if self.o["timeout"] is not None and time.monotonic() - start > self.o["timeout"]:
                self.stopped = "timeout"
                if otrial is not None:
                    study.tell(otrial, state=optuna.trial.TrialState.FAIL)
                break
            if config is not None and config.hash() in self.done_hashes:
                if otrial is not None:
                    study.tell(otrial, state=optuna.trial.TrialState.PRUNED)
                continue
            trial_no = self.next_trial
            self.next_trial += 1
            if config is None or not config.is_valid():
                self.record(trial_no, params, config, None, "invalid_config",
                            "derived() gave no valid configuration" if config is None else "max_threads is below the threads per block")
                if otrial is not None:
                    study.tell(otrial, state=optuna.trial.TrialState.FAIL)
                continue
            shape = (config.block.x, config.block.y, config.block.z)
            if shape in banned:
                self.record(trial_no, params, config, None, "invalid_launch",
                            "block shape banned after it failed to launch", banned=True)
                if otrial is not None:
                    study.tell(otrial, state=optuna.trial.TrialState.FAIL)
                continue
            pending.append((trial_no, params, config, otrial, executor.submit(config)))
            # Optuna learns from finished trials, so tpe waits for a slot.
            drain(self.o["workers"] - 1)
        drain(0)


def _open_study(o: Mapping[str, Any]) -> Any:
    import optuna

    pruners: dict[str, Callable[[], Any]] = {
        "none": optuna.pruners.NopPruner,
        "median": optuna.pruners.MedianPruner,
        "percentile": lambda: optuna.pruners.PercentilePruner(25.0),
        "hyperband": optuna.pruners.HyperbandPruner,
        "successive-halving": optuna.pruners.SuccessiveHalvingPruner,
        "threshold": lambda: optuna.pruners.ThresholdPruner(upper=math.inf),
    }
    pruner = pruners[o["pruner"]]()
    direction: Literal["minimize", "maximize"] = "maximize" if o["objective"] == "speedup" else "minimize"
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(
        study_name=o["study_name"], storage=o["optuna_storage"], sampler=optuna.samplers.TPESampler(seed=o["seed"]),
        pruner=pruner, direction=direction, load_if_exists=True)


def proteus_entry(config: Mapping[str, Any]) -> dict[str, Any]:
    """Proteus's PROTEUS_TUNED_KERNELS fields for one configuration."""
    passes = str(config.get("passes", "default<O3>"))
    level = "3"
    if passes.startswith("default<O") and passes.endswith(">") and len(passes) == len("default<O3>"):
        level = passes[len("default<O")]
    return {
        "Pipeline": passes,
        "CodeGen": "serial",
        "SpecializeArgs": bool(config.get("specialize", False)),
        "SpecializeDims": bool(config.get("specialize_dims", False)),
        "LaunchBounds": bool(config.get("set_launch_bounds", False)),
        # Proteus reads OptLevel as a string (its first character).
        "OptLevel": level,
        "CodeGenOptLevel": int(config.get("codegen_opt", 3)),
        "TunedMaxThreads": int(config.get("max_threads", 1024)),
        "MinBlocksPerSM": int(config.get("min_blocks_per_sm", 1)),
        "Block": config.get("block"),
        "Grid": config.get("grid"),
    }


def _write_json(path: Path, doc: Any) -> None:
    path.write_text(json.dumps(doc, indent=2) + "\n")


def _results_dir(o: Mapping[str, Any]) -> Path:
    if o["results_dir"]:
        return Path(o["results_dir"])
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    return Path("mneme-tune-results") / stamp


def run(o: dict[str, Any]) -> int:
    """Runs the tuning the options describe; returns the exit code."""
    if o["dump_config"] is not None:
        _dump_config(o, o["dump_config"])
        return EXIT_OK
    try:
        rec = RecordedExecution.from_json(o["record_database"])
        kernel = rec[str(o["record_id"])]
    except KeyError:
        print(f"mneme tune: --record-id {o['record_id']}: no such instance in {o['record_database']}", file=sys.stderr)
        return EXIT_RECORD
    except Exception as e:
        print(f"mneme tune: --record-database {o['record_database']}: {e}", file=sys.stderr)
        return EXIT_RECORD
    space = build_space(o, kernel)
    try:
        baseline_config = space.baseline()
        desc = describe_space(o, space)
    except Exception as e:
        raise ConfigError(f"search space {type(space).__name__}: {type(e).__name__}: {e}") from None
    if o["print_space"]:
        print(json.dumps(desc, indent=2))
        return EXIT_OK
    if o["dry_run"]:
        print(json.dumps({"baseline": baseline_config.to_dict(), "search_space": desc, "sampler": o["sampler"],
                          "trials": o["trials"]}, indent=2))
        return EXIT_OK

    out = _results_dir(o)
    if (out / "trials.jsonl").exists() and not o["resume"]:
        raise ConfigError(f"--results-dir {out} holds a run already; pass --resume to continue it")
    (out / "logs").mkdir(parents=True, exist_ok=True)
    log = logging.getLogger(f"mneme.tune.{id(o)}")
    log.setLevel(logging.INFO)
    log.propagate = False
    handler = logging.FileHandler(out / "logs" / "tune.log")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    log.addHandler(handler)
    try:
        return _tune(o, kernel, space, baseline_config, desc, out, log)
    finally:
        log.removeHandler(handler)
        handler.close()


def _tune(o: dict[str, Any], kernel: KernelInstance, space: SearchSpace, baseline_config: ExperimentConfiguration,
          desc: dict[str, Any], out: Path, log: logging.Logger) -> int:
    _write_json(out / "config.json", _jsonable(o))
    _write_json(out / "search_space.json", desc)
    tuner = Tuner(o, kernel, space, out, log)
    tuner.say(f"mneme tune: {kernel.kernel_name} instance {kernel.dynamic_hash}, results in {out}")
    executor = AsyncReplayExecutor(o["record_database"], str(o["record_id"]), o["iterations"], out / "logs",
                                   o["workers"], warmup=o["warmup"])
    study = None
    try:
        baseline_path = out / "baseline.json"
        if o["resume"] and baseline_path.exists() and not o["rerun_baseline"]:
            baseline = json.loads(baseline_path.read_text())
        else:
            result = executor.evaluate(baseline_config)
            baseline = {"config": baseline_config.to_dict(), "config_hash": baseline_config.hash(),
                        "status": classify(result),
                        "metric": metric_of(result, o["metric"], o["iterations"]) if result.verified else None,
                        "result": result.to_dict()}
            _write_json(baseline_path, baseline)
        if baseline["status"] != "verified" or baseline["metric"] is None:
            tuner.say(f"baseline did not verify ({baseline['status']}): {baseline['result'].get('error', '')}")
            _write_summary(tuner, "baseline_failed")
            return EXIT_BASELINE
        tuner.baseline_metric = float(baseline["metric"])
        tuner.say(f"baseline {o['metric']} = {tuner.baseline_metric:.6g} ns")
        if o["baseline_only"]:
            _write_summary(tuner, "ok")
            return EXIT_OK
        if o["resume"]:
            tuner.resume_from()
        if o["sampler"] == "tpe":
            study = _open_study(o)
        tuner.run_candidates(executor, study)
    finally:
        executor.shutdown()

    best = tuner.best
    if best is None:
        best = {"trial": -1, "status": "verified", "params": {"baseline": True}, "config": baseline["config"],
                "config_hash": baseline.get("config_hash"), "metric": tuner.baseline_metric, "speedup": 1.0,
                "value": tuner.value(tuner.baseline_metric)}
    _write_json(out / "best.json", best)
    status = {"": "ok", "timeout": "timeout", "fail_fast": "stopped_fail_fast"}[tuner.stopped]
    _write_summary(tuner, status)
    if not o["no_proteus_output"]:
        path = Path(o["proteus_output"]) if o["proteus_output"] else out / "proteus_tuned_kernels.json"
        _write_json(path, {kernel.kernel_name: proteus_entry(best["config"])})
    tuner.say(f"best: trial {best['trial']} {json.dumps(best['params'], sort_keys=True)} "
              f"{o['metric']}={best['metric']:.6g} speedup={best['speedup']:.4g}")
    return EXIT_OK


def _write_summary(t: Tuner, status: str) -> None:
    best = t.best
    doc: dict[str, Any] = {
        "status": status,
        "num_trials_requested": t.o["trials"],
        "num_trials_completed": t.num_completed,
        "num_verified": t.num_verified,
        **t.counts,
        "baseline_metric": t.baseline_metric,
        "best_metric": best["metric"] if best else t.baseline_metric,
        "best_speedup": best["speedup"] if best else (1.0 if t.baseline_metric is not None else None),
        "best_trial": best["trial"] if best else -1,
    }
    _write_json(t.out / "summary.json", doc)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `mneme-tune`; returns Mneme's exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        opts = resolve_options(args)
        return run(opts)
    except ConfigError as e:
        print(f"mneme tune: {e}", file=sys.stderr)
        return EXIT_CONFIG
    except KeyboardInterrupt:
        print("mneme tune: interrupted", file=sys.stderr)
        return EXIT_INTERNAL
    except Exception as e:  # the run's own failure, not the user's input
        print(f"mneme tune: internal error: {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    raise SystemExit(main())
