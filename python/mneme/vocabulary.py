"""The tuner's vocabulary, as the Go engine defines it.

`vocabulary.json` is written from the Go tables (`mneme tune
--dump-vocabulary`; tune/pyfixture_test.go checks it is current): the
configuration's keys and kinds, the trial statuses, the presets and the
option words. The Python package reads its words from here, and its tests
check the classes against it, so the two languages cannot drift apart.
"""

from __future__ import annotations

import json
import os
from typing import Any

__all__ = ["VOCABULARY", "CONFIG_KEYS", "STATUSES", "PRESETS", "SAMPLERS", "PRUNERS", "SUMMARY_KEYS"]


def _read(path: str) -> str:
    # os.path, not pathlib: importing pathlib is a noticeable part of the
    # proposer's start-up.
    with open(path, encoding="utf-8") as f:
        return f.read()


VOCABULARY: dict[str, Any] = json.loads(_read(os.path.join(os.path.dirname(__file__), "vocabulary.json")))

CONFIG_KEYS: tuple[str, ...] = tuple(f["key"] for f in VOCABULARY["config"])
STATUSES: tuple[str, ...] = tuple(VOCABULARY["statuses"])
PRESETS: tuple[str, ...] = tuple(VOCABULARY["presets"])
SAMPLERS: tuple[str, ...] = tuple(VOCABULARY["samplers"])
PRUNERS: tuple[str, ...] = tuple(VOCABULARY["pruners"])
SUMMARY_KEYS: tuple[str, ...] = tuple(VOCABULARY["summary_keys"])
