"""mneme.pipeline: random pipelines as Mneme's PipelineManager draws them (its bezier-surface script does)."""

from __future__ import annotations

import random
import statistics

import pytest

from mneme.pipeline import PipelineManager
from mneme.tuning.search_space import DEFAULT_PIPELINE_PASSES


def test_generate_is_reproducible_per_seed_and_leaves_global_random_alone() -> None:
    pm = PipelineManager()
    random.seed(7)
    before = random.random()
    random.seed(7)
    a = pm.generate(50, 120, 20, True, 0)
    assert random.random() == before
    assert pm.generate(50, 120, 20, True, 0) == a
    assert pm.generate(50, 120, 20, True, 1) != a


def test_lengths_follow_the_mean_and_passes_come_from_the_list() -> None:
    pm = PipelineManager()
    pipelines = pm.generate(200, 120, 20, True, 0)
    assert len(pipelines) == 200
    lengths = [len(p) for p in pipelines]
    assert 110 < statistics.mean(lengths) < 130
    assert all(p in DEFAULT_PIPELINE_PASSES for pipeline in pipelines for p in pipeline)


def test_lengths_are_at_least_one_and_without_repeats_at_most_the_passes() -> None:
    pm = PipelineManager(["a", "b", "c"])
    assert all(len(p) == 1 for p in pm.generate(20, -5, 0, True, 0))
    for p in pm.generate(20, 10, 0, False, 0):
        assert sorted(p) == ["a", "b", "c"]
    assert all(len(p) == 2 for p in pm.generate(20, 2, 0, False, 0))
    assert all(len(p) == 10 for p in pm.generate(20, 10, 0, True, 0))


def test_to_string_and_from_string() -> None:
    pm = PipelineManager()
    text = pm.to_string(["instcombine", "gvn", "licm"])
    assert text == "function(instcombine,gvn,licm)"
    assert pm.from_string(text) == ["instcombine", "gvn", "licm"]
    assert pm.from_string("function<eager-inv>(sroa),function(loop(licm))") == ["sroa", "licm"]
    with pytest.raises(RuntimeError, match="Unknown pass nosuchpass"):
        pm.from_string("function(instcombine,nosuchpass)")
    with pytest.raises(ValueError, match="empty pipeline"):
        pm.to_string([])


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="passes"):
        PipelineManager([])
    with pytest.raises(ValueError, match="samples"):
        PipelineManager().generate(-1, 10, 1)
    with pytest.raises(ValueError, match="std"):
        PipelineManager().generate(1, 10, -1)
    assert PipelineManager().get_passes() == list(DEFAULT_PIPELINE_PASSES)
