"""The list-major crossover: timed on the engine's own index when it outgrows the cache, pinned by
the caller or the environment, and a step never list-major where list-major never paid."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ragraph.errors import ConfigError
from ragraph.runtime.retrieval.ivf import engine as engine_module
from ragraph.runtime.retrieval.ivf import sharing_trial
from ragraph.runtime.retrieval.ivf.engine import FaissIVFEngine
from ragraph.runtime.retrieval.ivf.sharing_trial import Trial
from ragraph.runtime.retrieval.protocol import ScanOrder, SearchTask
from ragraph.runtime.scheduler.policies import list_major_batch

from .helpers import make_ivf


@pytest.fixture
def unpinned(monkeypatch):
    monkeypatch.delenv(sharing_trial.ENV, raising=False)


@pytest.fixture
def outgrown(monkeypatch, unpinned):
    """This machine's cache smaller than any index, so an engine left to itself runs the trial."""
    monkeypatch.setattr(engine_module, "last_level_cache_bytes", lambda: 2)


def test_the_crossover_from_the_two_timings():
    assert Trial(low=0.8, high=0.5).min_sharing(2.5) == 2.5  # won at 4: the library's own
    assert Trial(low=0.8, high=0.5).min_sharing(6.0) == 4.0
    assert Trial(low=1.5, high=0.5).min_sharing(2.5) == pytest.approx(10.0)  # crosses halfway
    assert math.isinf(Trial(low=2.0, high=1.3).min_sharing(2.5))  # lost at 16 as well
    said = Trial(low=1.5, high=0.5).describe(10.0)
    assert "from 10.0 queries a list" in said and "1.50x" in said and "0.50x at 16" in said


def test_the_environment_pins_it(monkeypatch):
    monkeypatch.setenv(sharing_trial.ENV, "never")
    assert math.isinf(sharing_trial.pinned())
    monkeypatch.setenv(sharing_trial.ENV, "3.5")
    assert sharing_trial.pinned() == 3.5
    for bad in ("0", "many"):
        monkeypatch.setenv(sharing_trial.ENV, bad)
        with pytest.raises(ConfigError, match=sharing_trial.ENV):
            sharing_trial.pinned()


def _shared_step(engine: FaissIVFEngine, vectors: np.ndarray, n: int = 32):
    queries = vectors[:n]
    probe = engine.probe(queries, engine.nlist)  # every query probes every list
    return [SearchTask.of(q, p) for q, p in zip(queries, probe, strict=True)], probe


def test_an_index_outgrowing_the_cache_is_timed_once_and_steps_follow_it(
        outgrown, monkeypatch, random_vectors):
    calls = []

    def lost(engine, seed=0):
        calls.append(engine)
        return Trial(low=3.0, high=2.0)

    monkeypatch.setattr(engine_module, "run_trial", lost)
    engine = FaissIVFEngine(make_ivf(random_vectors, 16, "l2"))
    tasks, probe = _shared_step(engine, random_vectors)
    step = engine.search_step(tasks, 10, ScanOrder.LIST)
    assert len(calls) == 1 and math.isinf(engine.list_rule.min_sharing)
    assert "never" in engine.list_rule.trial.describe(engine.list_rule.min_sharing)
    assert not step.stats.list_major  # 32 queries a list, and still faiss's cluster order
    engine.search_step(tasks, 10, ScanOrder.LIST)
    assert len(calls) == 1
    # the finals are index.search's either way
    finals = [engine.finish(t.query, p, [part], 10).ids
              for t, p, part in zip(tasks, probe, step.partials, strict=True)]
    _, ids = engine.search(random_vectors[:32], 10, engine.nlist)
    assert np.array_equal(np.stack(finals), ids)


def test_a_won_trial_keeps_steps_list_major(outgrown, monkeypatch, random_vectors):
    monkeypatch.setattr(engine_module, "run_trial", lambda engine, seed=0: Trial(0.5, 0.4))
    engine = FaissIVFEngine(make_ivf(random_vectors, 16, "l2"))
    tasks, _ = _shared_step(engine, random_vectors)
    assert engine.search_step(tasks, 10, ScanOrder.LIST).stats.list_major


def test_pinned_hosts_and_indexes_in_cache_are_not_timed(outgrown, monkeypatch, random_vectors):
    def never(engine, seed=0):
        raise AssertionError("timed")

    monkeypatch.setattr(engine_module, "run_trial", never)
    index = make_ivf(random_vectors, 16, "l2")
    assert FaissIVFEngine(index, cache_bytes=0).list_rule.measured is None
    assert FaissIVFEngine(index, min_sharing=5.0).list_rule.min_sharing == 5.0
    monkeypatch.setenv(sharing_trial.ENV, "never")
    assert math.isinf(FaissIVFEngine(index).list_rule.min_sharing)
    monkeypatch.setattr(engine_module, "last_level_cache_bytes", lambda: 1 << 40)
    monkeypatch.delenv(sharing_trial.ENV)
    assert FaissIVFEngine(index).list_rule.measured is None


def test_the_trial_times_both_scans_on_a_real_index(random_vectors):
    engine = FaissIVFEngine(make_ivf(random_vectors, 16, "ip"), cache_bytes=0)
    trial = sharing_trial.run_trial(engine)
    assert trial.low > 0 and trial.high > 0
    assert trial.min_sharing(2.5) >= 2.5


def test_no_list_major_batch_where_list_major_never_pays():
    assert list_major_batch(math.inf, 1024, 128) == 0
    assert list_major_batch(2.5, 1024, 128) == 20
