"""Random LLVM pass pipelines for search spaces, as Mneme's `mneme.pipeline` offers them.

`PipelineManager().generate(samples, mean_passes, std, allow_repeats, seed)`
draws `samples` pipelines whose lengths follow a normal distribution around
`mean_passes`; `to_string` turns one into new-pass-manager text that replay
compiles. The passes are those a `PipelineParam` draws from
(`search_space.DEFAULT_PIPELINE_PASSES`): function passes that run on any
kernel, so every generated pipeline compiles. Mneme draws from LLVM's whole
listing with random pass options; a pipeline here is a list of pass names.
"""

from __future__ import annotations

import random
from typing import Iterable, Sequence

from .tuning.search_space import DEFAULT_PIPELINE_PASSES, PipelineParam

__all__ = ["PipelineManager"]


class PipelineManager:
    """Draws pipelines from a list of pass names (default: DEFAULT_PIPELINE_PASSES)."""

    def __init__(self, passes: Sequence[str] = DEFAULT_PIPELINE_PASSES):
        if not passes or any(not isinstance(p, str) or not p for p in passes):
            raise ValueError(f"PipelineManager: passes must be non-empty pass names, got {passes!r}")
        self._passes = list(passes)

    def get_passes(self) -> list[str]:
        """The pass names pipelines are drawn from."""
        return list(self._passes)

    def generate(self, samples: int, mean_passes: float, std: float, allow_repeats: bool = True, seed: int = 0) -> list[list[str]]:
        """`samples` pipelines, reproducible for a seed.

        Each length is drawn from N(mean_passes, std), rounded, at least 1;
        without repeats it is at most the number of passes. Unlike Mneme's,
        the draw uses a generator of its own and leaves Python's global
        `random` state alone.
        """
        if isinstance(samples, bool) or not isinstance(samples, int) or samples < 0:
            raise ValueError(f"PipelineManager.generate: samples must be a non-negative integer, got {samples!r}")
        if std < 0:
            raise ValueError(f"PipelineManager.generate: std must be >= 0, got {std!r}")
        rng = random.Random(seed)
        out: list[list[str]] = []
        for _ in range(samples):
            length = max(1, int(round(rng.gauss(mean_passes, std))))
            if allow_repeats:
                out.append([rng.choice(self._passes) for _ in range(length)])
            else:
                out.append(rng.sample(self._passes, min(length, len(self._passes))))
        return out

    @staticmethod
    def to_string(passes: Iterable[object]) -> str:
        """New-pass-manager text of a pipeline: `function(p1,p2,...)`."""
        names = [str(p) for p in passes]
        if not names:
            raise ValueError("PipelineManager.to_string: an empty pipeline")
        return PipelineParam.text(names)

    def from_string(self, text: str) -> list[str]:
        """The pass names of pipeline text (adaptors such as `function(...)` removed);
        raises RuntimeError on a pass it does not know, as Mneme's does."""
        flat = text
        for adaptor in ("function<eager-inv>(", "function(", "cgscc(", "loop-mssa(", "loop(", "loopnest("):
            flat = flat.replace(adaptor, "")
        names = [p.strip() for p in flat.replace(")", "").split(",") if p.strip()]
        known = set(self._passes)
        for name in names:
            if name.split("<", 1)[0] not in known:
                raise RuntimeError(f"Unknown pass {name}")
        return names
