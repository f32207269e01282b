"""Every trial status the Go executor can report, and the summary count Mneme's summary.json keeps it under.

The engine (Go) classifies trials and writes summary.json (tune.Summary,
tested per status in tune/shape_test.go); this table ties the Python
package's vocabulary to it, and a Go test ties the table to Statuses().
"""

from __future__ import annotations

import pytest

from mneme import vocabulary
from mneme.mneme_types import STATUSES

# Every status of mneme.Statuses() (result.go), and the one Mneme's summary
# counts it under. Mneme's summary has no timeout or crash: they count as
# runtime errors.
ROWS = [
    ("verified", "verified"),
    ("invalid_launch", "invalid_launch"),
    ("invalid_config", "invalid_config"),
    ("compile_error", "compile_error"),
    ("runtime_error", "runtime_error"),
    ("failed_verification", "failed_verification"),
    ("internal_error", "internal_error"),
    ("timeout", "runtime_error"),
    ("crashed", "runtime_error"),
]


def test_the_table_is_the_engines_statuses() -> None:
    assert sorted(s for s, _ in ROWS) == sorted(STATUSES) == sorted(vocabulary.STATUSES)


@pytest.mark.parametrize("status,counted", ROWS)
def test_every_status_has_its_summary_count(status: str, counted: str) -> None:
    key = "num_verified" if counted == "verified" else "num_" + counted
    assert key in vocabulary.SUMMARY_KEYS
