"""Every trial status the Go executor can report, through the tune CLI's classification and summary counts."""

from __future__ import annotations

import pytest

from mneme.cli.tune import _STATUS_COUNTS, classify
from mneme.mneme_types import ExperimentResult

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


def _result(status: str) -> ExperimentResult:
    if status == "verified":
        return ExperimentResult(verified=True, executed=True, status=status, exec_time=[1.0])
    if status == "failed_verification":
        return ExperimentResult(executed=True, failed=True, status=status)
    return ExperimentResult.failure(status, f"the trial ended {status}")


@pytest.mark.parametrize("status,counted", ROWS)
def test_classify_every_status(status: str, counted: str) -> None:
    assert classify(_result(status)) == counted


def test_every_failure_status_has_its_summary_count() -> None:
    failures = {counted for _, counted in ROWS if counted != "verified"}
    assert set(_STATUS_COUNTS) == failures
    for status in failures:
        assert _STATUS_COUNTS[status] == "num_" + status


def test_classify_without_a_status() -> None:
    # A result from a worker that names no status: verified when it says so,
    # a verification failure when it ran, else an internal error.
    assert classify(ExperimentResult(verified=True, executed=True)) == "verified"
    assert classify(ExperimentResult(executed=True)) == "failed_verification"
    assert classify(ExperimentResult(executed=True, failed=True)) == "internal_error"
    assert classify(ExperimentResult()) == "internal_error"
    # A verified flag on a failed result does not make it verified.
    assert classify(ExperimentResult(verified=True, executed=True, failed=True, status="runtime_error")) == "runtime_error"
    # A status from a newer worker is an internal error, never a success.
    assert classify(ExperimentResult(failed=True, status="from_a_newer_worker")) == "internal_error"
