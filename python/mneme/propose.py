"""The Python side of `mneme tune` runs whose points come from Python.

`mneme tune` (the Go engine) runs every trial, writes every results file and
sets the exit code. What needs Python is proposing points: a user's
`SearchSpace` class (`--space-module <file>.py:Class`), and Optuna's samplers,
pruners and storages (`--study-name`, `--optuna-storage`, `--pruner`). For
those runs the engine starts `python -m mneme.propose` and speaks JSON lines
with it on stdin/stdout (tune/PROTOCOL.md, "Proposals from Python"):

    {"op": "open", ...}  -> {"ok": true, "space": {...}}
                            (exhaustive and random: also "points": [...],
                            every proposal at once; no ask or tell follows)
    {"op": "ask"}        -> {"ok": true, "id": N, "params": {...}, "config": {...}}
                            or {"ok": true, "done": true}
    {"op": "tell", "id": N, "loss": ns_or_absent, "status": "..."} -> {"ok": true}
    {"op": "close"}      -> {"ok": true}

A request the proposer cannot serve is answered {"ok": false, "error": ...}
naming the flag; the engine reports it (exit 2). The user's code may print:
its output goes to stderr, never into the protocol.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
import os
import sys
from pathlib import Path
from typing import IO, Any, Callable, Iterator, Mapping

from .mneme_types import ExperimentConfiguration
from .recorded_execution import RecordedExecution
from .tuning.sample_strategy import ExhaustiveSamplingStrategy, OptunaSamplingStrategy, RandomSamplingStrategy
from .tuning.search_space import (
    BoolParam,
    CategoricalParam,
    FixedParam,
    IntRangeParam,
    Param,
    PipelineParam,
    RealRangeParam,
    SearchSpace,
)

__all__ = ["main", "ProposeError", "describe_param", "param_from_go"]

# One request line at most; requests are small.
MAX_REQUEST = 1 << 20
# A finite space up to this size is enumerated to count its feasible points.
MAX_COUNT_FEASIBLE = 200_000
# Trials when the run gives none and the space is not finite.
DEFAULT_TRIALS = 100
# Exhaustive and random proposals up to this many are all sent in the open
# answer: one round trip instead of two per trial (answers stay well under
# the engine's 16 MiB line bound at ~300 bytes a point).
MAX_BATCH = 10_000


class ProposeError(Exception):
    """A request the proposer cannot serve; the message names the flag."""


def _jsonable(v: Any) -> Any:
    if isinstance(v, tuple):
        return [_jsonable(x) for x in v]
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else repr(v)
    return repr(v)


def describe_param(p: Param) -> dict[str, Any]:
    """A Python parameter as the engine's parameter JSON (tune.Param)."""
    if isinstance(p, FixedParam):
        return {"name": p.name, "kind": "fixed", "choices": [_jsonable(p.value)]}
    if isinstance(p, BoolParam):
        return {"name": p.name, "kind": "bool", "choices": [False, True]}
    if isinstance(p, CategoricalParam):
        return {"name": p.name, "kind": "categorical", "choices": [_jsonable(c) for c in p.choices]}
    if isinstance(p, IntRangeParam):
        return {"name": p.name, "kind": "int", "low": p.low, "high": p.last, "step": p.step}
    if isinstance(p, RealRangeParam):
        return {"name": p.name, "kind": "real", "low": p.low, "high": p.high, "log": p.log}
    if isinstance(p, PipelineParam):
        # Each draw picks one of these passes; the value is the pipeline text.
        return {"name": p.name, "kind": "pipeline", "choices": [f"{p.num_draws} of {q}" for q in p.passes]}
    return {"name": p.name, "kind": "categorical", "choices": [repr(p)]}


def param_from_go(d: Mapping[str, Any]) -> Param:
    """The engine's parameter JSON as a Python parameter (for Optuna)."""
    name, kind = str(d.get("name", "")), d.get("kind")
    choices = list(d.get("choices") or [])
    if kind == "fixed":
        return FixedParam(name, choices[0] if choices else None)
    if kind == "bool":
        return BoolParam(name)
    if kind in ("categorical", "pipeline"):
        return CategoricalParam(name, choices)
    if kind == "int":
        return IntRangeParam(name, int(d.get("low", 0)), int(d.get("high", 0)), int(d.get("step", 1) or 1))
    if kind == "real":
        return RealRangeParam(name, float(d.get("low", 0.0)), float(d.get("high", 0.0)), bool(d.get("log", False)))
    raise ProposeError(f"parameter {name!r}: unknown kind {kind!r}")


def _load_space_class(spec: str) -> type:
    target, sep, cls_name = spec.rpartition(":")
    if not sep or not target or not cls_name:
        raise ProposeError(f"--space-module {spec!r}: want <file>.py:Class or module:Class")
    try:
        if target.endswith(".py") or os.sep in target:
            path = Path(target)
            if not path.is_file():
                raise ProposeError(f"--space-module {spec}: no file {target}")
            name = f"mneme_user_space_{abs(hash(str(path.resolve())))}"
            mod_spec = importlib.util.spec_from_file_location(name, path)
            if mod_spec is None or mod_spec.loader is None:
                raise ProposeError(f"--space-module {spec}: cannot load {target}")
            module = importlib.util.module_from_spec(mod_spec)
            sys.modules[name] = module
            # The user's file may import its neighbours.
            sys.path.insert(0, str(path.resolve().parent))
            mod_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(target)
    except ProposeError:
        raise
    except BaseException as e:  # the user's module: anything it raises, even SystemExit
        raise ProposeError(f"--space-module {spec}: loading {target} failed: {type(e).__name__}: {e}") from None
    cls = getattr(module, cls_name, None)
    if not isinstance(cls, type) or not issubclass(cls, SearchSpace):
        raise ProposeError(f"--space-module {spec}: {cls_name} is not a SearchSpace class in {target}")
    return cls


def _space_kwargs(items: list[str]) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    for item in items:
        key, eq, text = item.partition("=")
        if not eq or not key:
            raise ProposeError(f"--space-arg {item!r}: want KEY=VALUE")
        try:
            kwargs[key] = json.loads(text)
        except ValueError:
            kwargs[key] = text
    return kwargs


def _construct(cls: type, kernel: Any, kwargs: dict[str, Any], spec: str) -> SearchSpace:
    # Mneme's tune constructs the class with the recorded kernel instance;
    # a class that takes no kernel is constructed without it.
    errors = []
    for args in ((kernel,), ()):
        try:
            return cls(*args, **kwargs)  # type: ignore[no-any-return]
        except TypeError as e:
            errors.append(e)
        except Exception as e:
            raise ProposeError(f"--space-module {spec}: constructing {cls.__name__} failed: {type(e).__name__}: {e}") from None
    raise ProposeError(f"--space-module {spec}: constructing {cls.__name__} failed: {errors[0]}")


class _GoSpace(SearchSpace):
    """The engine's own space, for Optuna: the engine derives configurations."""

    def __init__(self, params: list[Param]):
        self._dims = {p.name: p for p in params}

    def dimensions(self) -> Mapping[str, Param]:
        return self._dims

    def constraints(self, params: Mapping[str, Any]) -> bool:
        return True

    def derived(self, params: Mapping[str, Any]) -> ExperimentConfiguration:
        raise NotImplementedError("the engine derives this space's configurations")


def _open_study(req: Mapping[str, Any]) -> Any:
    try:
        import optuna
    except ImportError:
        raise ProposeError("--sampler tpe through Optuna (--study-name, --optuna-storage, --pruner) needs optuna installed") from None
    pruners: dict[str, Callable[[], Any]] = {
        "": optuna.pruners.NopPruner,
        "none": optuna.pruners.NopPruner,
        "median": optuna.pruners.MedianPruner,
        "percentile": lambda: optuna.pruners.PercentilePruner(25.0),
        "hyperband": optuna.pruners.HyperbandPruner,
        "successive-halving": optuna.pruners.SuccessiveHalvingPruner,
        "threshold": lambda: optuna.pruners.ThresholdPruner(upper=math.inf),
    }
    pruner = str(req.get("pruner") or "")
    if pruner not in pruners:
        raise ProposeError(f"--pruner {pruner!r}: want one of {', '.join(p for p in pruners if p)}")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    seed = req.get("seed")
    try:
        return optuna.create_study(
            study_name=req.get("study_name") or None, storage=req.get("optuna_storage") or None,
            sampler=optuna.samplers.TPESampler(seed=int(seed) if seed else None),
            pruner=pruners[pruner](), direction="minimize", load_if_exists=True)
    except Exception as e:
        raise ProposeError(f"--optuna-storage {req.get('optuna_storage')!r}: {type(e).__name__}: {e}") from None


class Proposer:
    """One session: the space, the strategy, and the Optuna trials in flight."""

    def __init__(self) -> None:
        self.space: SearchSpace | None = None
        self.points: Iterator[tuple[dict[str, Any], ExperimentConfiguration | None, str, Any]] | None = None
        self.study: Any = None
        self.pending: dict[int, Any] = {}
        self.next_id = 1
        self.engine_derives = False

    def open(self, req: Mapping[str, Any]) -> dict[str, Any]:
        sampler = str(req.get("sampler") or "exhaustive")
        trials = int(req.get("trials") or 0)
        spec = str(req.get("space_module") or "")
        if spec:
            cls = _load_space_class(spec)
            try:
                rec = RecordedExecution.from_json(str(req.get("record_database", "")))
                kernel = rec[str(req.get("record_id", ""))]
            except (KeyError, ValueError, OSError) as e:
                raise ProposeError(f"--record-database: {e}") from None
            self.space = _construct(cls, kernel, _space_kwargs(list(req.get("space_args") or [])), spec)
        else:
            self.engine_derives = True
            self.space = _GoSpace([param_from_go(d) for d in req.get("params") or []])
        space = self.space
        try:
            dims = space.dimensions()
            size = 1.0
            for p in dims.values():
                size *= p.size()
            feasible: int | None = None
            batch: list[dict[str, Any]] | None = None
            if sampler == "exhaustive" and not self._uses_optuna(req) and math.isfinite(size) and size <= MAX_BATCH:
                # The exhaustive order is the feasible points: derive each once.
                self.points = self._exhaustive(space)
                batch = self._take_all()
                if not self.engine_derives:
                    feasible = len(batch)
            elif math.isfinite(size) and size <= MAX_COUNT_FEASIBLE and not self.engine_derives:
                feasible = sum(1 for _ in ExhaustiveSamplingStrategy(space).points())
            baseline = None
            if not self.engine_derives:
                try:
                    baseline = space.baseline().to_dict()
                except NotImplementedError:
                    baseline = None
        except ProposeError:
            raise
        except Exception as e:
            raise ProposeError(f"--space-module {spec}: {type(space).__name__}: {type(e).__name__}: {e}") from None
        if trials <= 0:
            trials = feasible if feasible is not None else (int(size) if math.isfinite(size) else DEFAULT_TRIALS)
        if batch is not None:
            pass
        elif self._uses_optuna(req):
            self.study = _open_study(req)
            self.points = self._optuna(space, trials)
        elif sampler == "random":
            seed = req.get("seed")
            self.points = self._random(space, trials, int(seed) if seed else None)
            if trials <= MAX_BATCH:
                batch = self._take_all()
        else:
            self.points = self._exhaustive(space)
        answer: dict[str, Any] = {"ok": True}
        if batch is not None:
            answer["points"] = batch
        if not self.engine_derives:
            answer["space"] = {
                "name": f"{type(space).__name__} ({spec})",
                "params": [describe_param(p) for p in dims.values()],
                "size": int(size) if math.isfinite(size) else None,
                "feasible": feasible,
                "baseline": baseline,
            }
        return answer

    @staticmethod
    def _uses_optuna(req: Mapping[str, Any]) -> bool:
        return bool(req.get("sampler") == "tpe" or req.get("study_name") or req.get("optuna_storage"))

    def _take_all(self) -> list[dict[str, Any]]:
        """Every remaining proposal, as ask answers; asks after it are done."""
        out: list[dict[str, Any]] = []
        while True:
            a = self.ask()
            if a.get("done"):
                return out
            del a["ok"]
            out.append(a)

    def _derive(self, params: Mapping[str, Any]) -> tuple[ExperimentConfiguration | None, str]:
        assert self.space is not None
        try:
            config = self.space.derived(params)
        except Exception as e:
            return None, f"derived() raised {type(e).__name__}: {e}"
        if not isinstance(config, ExperimentConfiguration):
            return None, f"derived() gave {type(config).__name__}, not an ExperimentConfiguration"
        if not config.is_valid():
            return None, "max_threads is below the threads per block"
        return config, ""

    def _exhaustive(self, space: SearchSpace) -> Iterator[tuple[dict[str, Any], ExperimentConfiguration | None, str, Any]]:
        for params in ExhaustiveSamplingStrategy(space).points():
            if self.engine_derives:
                yield params, None, "", None
            else:
                yield (params, *self._derive(params), None)

    def _random(self, space: SearchSpace, n: int, seed: int | None) -> Iterator[tuple[dict[str, Any], ExperimentConfiguration | None, str, Any]]:
        for item in RandomSamplingStrategy(space, n, seed=seed):
            yield item["parameters"], item["config"], "", None

    def _optuna(self, space: SearchSpace, n: int) -> Iterator[tuple[dict[str, Any], ExperimentConfiguration | None, str, Any]]:
        import optuna

        if self.engine_derives:
            dims = space.dimensions()
            for _ in range(n):
                trial = self.study.ask()
                yield {name: p.suggest(trial) for name, p in dims.items()}, None, "", trial
            return
        dims = space.dimensions()
        for config, trial in OptunaSamplingStrategy(space, self.study, n):
            # Fixed dimensions are not asked of Optuna, so trial.params lacks them.
            params = {name: trial.params[name] if name in trial.params else getattr(p, "value", None)
                      for name, p in dims.items()}
            if not config.is_valid():
                self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
                yield params, None, "max_threads is below the threads per block", None
                continue
            yield params, config, "", trial

    def ask(self) -> dict[str, Any]:
        assert self.points is not None
        try:
            item = next(self.points, None)
        except ProposeError:
            raise
        except Exception as e:
            raise ProposeError(f"sampling {type(self.space).__name__}: {type(e).__name__}: {e}") from None
        if item is None:
            return {"ok": True, "done": True}
        params, config, reason, trial = item
        ident = self.next_id
        self.next_id += 1
        if trial is not None:
            self.pending[ident] = trial
        answer: dict[str, Any] = {"ok": True, "id": ident, "params": _jsonable(params)}
        if config is not None:
            answer["config"] = config.to_dict()
        if reason:
            answer["reason"] = reason
        return answer

    def tell(self, req: Mapping[str, Any]) -> dict[str, Any]:
        trial = self.pending.pop(int(req.get("id") or 0), None)
        if trial is not None and self.study is not None:
            import optuna

            loss = req.get("loss")
            if isinstance(loss, (int, float)) and not isinstance(loss, bool) and math.isfinite(loss):
                self.study.tell(trial, float(loss))
            else:
                self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
        return {"ok": True}


def serve(inp: IO[bytes], out: IO[str]) -> int:
    """Answers requests until close or end of input."""
    proposer = Proposer()
    while True:
        line = inp.readline(MAX_REQUEST + 1)
        if not line:
            return 0
        answer: dict[str, Any]
        try:
            if len(line) > MAX_REQUEST:
                raise ProposeError(f"a request longer than {MAX_REQUEST} bytes")
            try:
                req = json.loads(line)
            except (ValueError, RecursionError) as e:
                raise ProposeError(f"a request that is not JSON: {e}") from None
            if not isinstance(req, dict):
                raise ProposeError("a request that is not a JSON object")
            op = req.get("op")
            if op == "open":
                answer = proposer.open(req)
            elif op == "ask":
                if proposer.points is None:
                    raise ProposeError("ask before open")
                answer = proposer.ask()
            elif op == "tell":
                answer = proposer.tell(req)
            elif op == "close":
                out.write(json.dumps({"ok": True}) + "\n")
                out.flush()
                return 0
            else:
                raise ProposeError(f"unknown op {op!r}")
        except ProposeError as e:
            answer = {"ok": False, "error": str(e)}
        except Exception as e:  # a fault here, not in the request
            answer = {"ok": False, "error": f"internal error: {type(e).__name__}: {e}"}
        out.write(json.dumps(answer) + "\n")
        out.flush()


def main() -> int:
    # The protocol keeps the real stdout; everything printed (the user's
    # code included) goes to stderr.
    proto = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    return serve(sys.stdin.buffer, proto)


if __name__ == "__main__":
    raise SystemExit(main())
