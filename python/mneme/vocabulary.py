"""The tuner's vocabulary, as the Go engine defines it.

`vocabulary.json` is written from the Go tables (`mneme tune
--dump-vocabulary`; tune/pyfixture_test.go checks it is current): the
configuration's keys and kinds, the trial statuses, the presets and the
option words. The Python package reads its words from here, and its tests
check the classes against it, so the two languages cannot drift apart.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["VOCABULARY", "CONFIG_KEYS", "STATUSES", "PRESETS", "SAMPLERS", "PRUNERS", "SUMMARY_KEYS"]

VOCABULARY: dict[str, Any] = json.loads(Path(__file__).with_name("vocabulary.json").read_text(encoding="utf-8"))

CONFIG_KEYS: tuple[str, ...] = tuple(f["key"] for f in VOCABULARY["config"])
STATUSES: tuple[str, ...] = tuple(VOCABULARY["statuses"])
PRESETS: tuple[str, ...] = tuple(VOCABULARY["presets"])
SAMPLERS: tuple[str, ...] = tuple(VOCABULARY["samplers"])
PRUNERS: tuple[str, ...] = tuple(VOCABULARY["pruners"])
SUMMARY_KEYS: tuple[str, ...] = tuple(VOCABULARY["summary_keys"])
