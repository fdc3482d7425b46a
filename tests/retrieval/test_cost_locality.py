"""Budgeted step planning, the cost model, locality reordering and the early-completion point."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from ragraph.errors import ConfigError
from ragraph.runtime.retrieval.ivf.cost import (
    STARVATION_STEPS,
    Pending,
    SearchCostModel,
    calibrate,
    calibrated,
    optimal_budget_ms,
    plan_step,
)
from ragraph.runtime.retrieval.ivf.engine import FaissIVFEngine
from ragraph.runtime.retrieval.ivf.listmajor import ListMajorRule
from ragraph.runtime.retrieval.ivf.locality import (
    History,
    completion_point,
    early_completion,
    groups,
    reorder,
)
from ragraph.runtime.retrieval.protocol import SearchTask

from .helpers import make_ivf, queries_from

# 1 ms per cluster of 10 vectors of dimension 100: 1e6 ns = 1000 elements * 1000 ns
UNIT = SearchCostModel(sizes=(10,) * 8, dim=100, ns_per_element=1000.0, ns_per_cluster=0.0)


def test_plan_finishes_the_shortest_retrievals_first_until_budget():
    pending = [Pending("a", (0, 1, 2, 3)), Pending("b", (4, 5)), Pending("c", (6,))]
    plan = plan_step(pending, 4.0, UNIT)
    assert plan.take == (("a", (0,)), ("b", (4, 5)), ("c", (6,)))
    assert plan.predicted_ms == pytest.approx(4.0)
    everything = plan_step(pending, 100.0, UNIT)
    assert everything.n_clusters == 7


def test_plan_serves_a_starved_retrieval_first():
    pending = [Pending("a", (0, 1, 2, 3), waited=STARVATION_STEPS), Pending("b", (4, 5)),
               Pending("c", (6,))]
    assert plan_step(pending, 4.0, UNIT).take == (("a", (0, 1, 2, 3)),)
    pending[0] = Pending("a", (0, 1, 2, 3), waited=STARVATION_STEPS - 1)
    assert plan_step(pending, 4.0, UNIT).take[0] == ("a", (0,))


def test_plan_always_makes_progress():
    plan = plan_step([Pending("a", (0, 1))], 0.1, UNIT)
    assert plan.take == (("a", (0,)),)
    assert plan_step([], 5.0, UNIT).take == ()
    with pytest.raises(ConfigError, match="budget_ms"):
        plan_step([Pending("a", (0,))], -1.0, UNIT)


def test_plan_respects_cluster_sizes():
    model = SearchCostModel(sizes=(100, 1, 1, 1), dim=10, ns_per_element=1000.0, ns_per_cluster=0.0)
    plan = plan_step([Pending("b", (0,)), Pending("a", (1, 2, 3))], 0.05, model)
    # "a" (0.03 ms left) goes before "b" (1 ms); cluster 0 would then overrun 0.05 ms: the step
    # closes there.
    assert plan.take == (("a", (1, 2, 3)),)
    assert plan_step([Pending("b", (0,))], 0.05, model).take == (("b", (0,)),)


def test_retrievals_left_behind_join_the_lists_the_step_scans():
    # "c" and "b" fit; "a" gets one cluster, then the budget ends the filling. "a" and "d"
    # (whose first list nobody else scans) take the step's lists they also probe, at the price
    # of a rescan.
    pending = [Pending("a", (0, 1, 5, 6)), Pending("b", (4, 5)), Pending("c", (6,)),
               Pending("d", (7, 4, 3, 6))]
    plan = plan_step(pending, 4.0, UNIT)
    assert plan.take == (("a", (0, 5, 6)), ("b", (4, 5)), ("c", (6,)), ("d", (4, 6)))
    rescan = UNIT.rescan_share
    assert plan.predicted_ms == pytest.approx(4.0 + 4 * rescan)
    # The rescans get half the budget again: at 2 ms, "a" joins list 6 (0.45 ms of 1 ms), and
    # "d" (4 and 6, 0.9 ms) no longer fits.
    tight = plan_step(pending, 2.0, UNIT)
    assert tight.take == (("a", (6,)), ("b", (4,)), ("c", (6,)))
    assert tight.predicted_ms == pytest.approx(2.0 + rescan)
    # Nothing left behind: the step scans exactly what was asked.
    assert plan_step(pending[1:3], 4.0, UNIT).take == (("b", (4, 5)), ("c", (6,)))


def test_step_cost_prices_repeated_lists_as_rescans():
    assert UNIT.step_ms(np.array([0, 1, 1, 1, 2])) == pytest.approx(3 + 2 * UNIT.rescan_share)
    assert UNIT.step_ms(np.array([], np.int64)) == 0.0
    with pytest.raises(ConfigError, match="rescan_share"):
        SearchCostModel(sizes=(1,), dim=4, rescan_share=0.0)


def test_list_major_steps_are_priced_as_the_engine_runs_them():
    model = replace(UNIT, list_rule=ListMajorRule(np.full(8, 10**6), cache_bytes=0))
    shared = np.repeat([0, 1], 8)  # 8 queries a list: list-major
    assert model.step_ms(shared) == pytest.approx(2 * (model.list_first + 7 * model.list_share))
    few = np.repeat([0, 1], 2)  # 2 a list: cluster order, repeats from cache
    assert model.step_ms(few) == pytest.approx(2 * (1 + model.rescan_share))
    cached = replace(model, list_rule=ListMajorRule(np.full(8, 1), cache_bytes=10**9))
    assert cached.step_ms(shared) == pytest.approx(2 * (1 + 7 * model.rescan_share))
    with pytest.raises(ConfigError, match="list_share"):
        replace(UNIT, list_share=0.0)


def test_cost_model_follows_measurements():
    model = UNIT
    for _ in range(40):
        model = model.observe(model.clusters_ms([0, 1]), measured_ms=4.0)
    assert model.clusters_ms([0, 1]) == pytest.approx(4.0, rel=1e-3)
    assert model.observe(0.0, 5.0) is model
    with pytest.raises(ConfigError, match="alpha"):
        SearchCostModel(sizes=(1,), dim=4, alpha=0.0)


def test_optimal_budget_is_hedrarag_sqrt_rule():
    beta, t_r = 0.5, 16.0
    mb = optimal_budget_ms(beta, t_r)
    assert mb == pytest.approx(4.0)

    def gain(m):
        return (t_r - m) / 2 - (t_r / m) * beta

    assert gain(mb) >= max(gain(mb * 0.8), gain(mb * 1.25))
    assert math.isclose(optimal_budget_ms(0.0, 10.0), 0.0)


def test_calibration_gives_a_usable_model(random_engine):
    model = calibrate(random_engine, seconds=0.05)
    assert model.ns_per_element > 0
    assert 0 < model.each_ms([0])[0] < 50
    assert model.list_rule is random_engine.list_rule  # priced by the engine's own rule


def test_each_engine_is_calibrated_once(random_vectors):
    a, b = (FaissIVFEngine(make_ivf(random_vectors, 16, "l2")) for _ in range(2))
    model = calibrated(a, seconds=0.02)
    assert calibrated(a) is model  # later runs on the engine skip the micro-benchmark
    assert calibrated(b, seconds=0.02) is not model


def cluster_of_identity(ids):
    return np.asarray(ids) // 10


def test_reorder_groups_keep_probe_order():
    history = History().record([11, 12, 31, -1], probe=[1, 3, 5, 7], cluster_of=cluster_of_identity)
    assert history.result_clusters == {1, 3}
    probe = np.array([9, 7, 3, 8, 1, 5, 2])
    assert reorder(probe, history).tolist() == [3, 1, 7, 5, 9, 8, 2]
    assert groups(probe, history).__dict__ == {"held": 2, "probed": 2, "rest": 3}
    assert reorder(probe, History()).tolist() == probe.tolist()


def test_history_keeps_top20_and_cache_order():
    h = History().record(list(range(30)), probe=[0], cluster_of=cluster_of_identity)
    assert len(h.records[0].ids) == 20
    h = h.record([100, 3], probe=[10], cluster_of=cluster_of_identity)
    assert h.cached_ids[:3] == (100, 3, 0)
    assert h.probe_clusters == {0, 10}


def test_completion_point():
    assert completion_point(np.array([4, 2]), [2, 9, 4, 1]) == 3
    assert completion_point(np.array([], dtype=np.int64), [2, 9]) == 0
    with pytest.raises(ConfigError, match="omits"):
        completion_point(np.array([5]), [2, 9])


def test_early_completion_matches_prefix_searches(random_engine, random_vectors):
    """After c clusters the partial top-k equals the final one, and not after c - 1."""
    rng = np.random.default_rng(20)
    for q in queries_from(rng, random_vectors, 6):
        order = rng.permutation(random_engine.probe(q, 16)[0])
        final = random_engine.finish(
            q, order, random_engine.search_step([SearchTask.of(q, order)], 10).partials, 10
        )
        c = early_completion(random_engine, q, order, 10)

        def prefix_ids(n, q=q, order=order):
            part = random_engine.search_step([SearchTask.of(q, order[:n])], 10).partials[0]
            return part.ids[:10]

        assert np.array_equal(prefix_ids(c), final.ids)
        assert c == 1 or not np.array_equal(prefix_ids(c - 1), final.ids)
