"""Shard plans and step routing (pure, no Ray): lists balanced by size, hot lists on two shards,
every cluster of a step scanned exactly once, by a live holder where there is one."""

from __future__ import annotations

import numpy as np
import pytest

from ragraph.errors import ConfigError
from ragraph.runtime.retrieval.ivf.shard_plan import ShardPlan, plan_shards, route_step
from ragraph.runtime.retrieval.merge import replay_heap

from .helpers import make_ivf, queries_from


def skewed_sizes(n: int = 200, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).zipf(1.6, n).clip(max=5000).astype(np.int64)


@pytest.mark.parametrize("shards", [1, 2, 3, 8])
def test_lists_are_balanced_by_size(shards):
    sizes = skewed_sizes()
    plan = plan_shards(sizes, shards)
    loads = np.array([sizes[plan.clusters_of(s)].sum() for s in range(shards)])
    assert loads.sum() == sizes.sum()
    # LPT: no shard exceeds the mean by more than the largest list.
    assert loads.max() <= sizes.sum() / shards + sizes.max()
    assert sorted(np.concatenate([plan.clusters_of(s) for s in range(shards)]).tolist()) == list(
        range(sizes.size))


def test_the_largest_lists_are_held_twice():
    sizes = skewed_sizes()
    plan = plan_shards(sizes, 4, replicate=0.05)
    hot = plan.replicated()
    assert hot.size == 10
    assert set(hot.tolist()) == set(np.argsort(-sizes, kind="stable")[:10].tolist())
    assert all(len(set(plan.holders[c])) == 2 for c in hot.tolist())
    assert plan_shards(sizes, 1, replicate=0.5).replicated().size == 0  # nowhere to copy to


def test_routing_scans_each_cluster_once_on_a_live_holder():
    sizes = skewed_sizes()
    plan = plan_shards(sizes, 3, replicate=0.2)
    rng = np.random.default_rng(1)
    tasks = [rng.choice(sizes.size, size=int(rng.integers(0, 30)), replace=False)
             for _ in range(40)]
    for alive in ({0, 1, 2}, {0, 2}, set()):
        routes = route_step(tasks, plan, sizes, alive)
        for t, clusters in enumerate(tasks):
            got = np.concatenate([rows[t] for rows in routes.values()])
            assert sorted(got.tolist()) == sorted(clusters.tolist())
        for shard, rows in routes.items():
            for c in np.concatenate(rows).tolist():
                assert shard in plan.holders[c]
                if any(h in alive for h in plan.holders[c]):
                    assert shard in alive


def test_replicated_lists_split_the_work():
    sizes = np.full(4, 100, dtype=np.int64)
    plan = ShardPlan(2, ((0, 1),) * 4)
    routes = route_step([np.arange(4)] * 2, plan, sizes, {0, 1})
    assert [sum(r.size for r in rows) for rows in routes.values()] == [4, 4]


@pytest.mark.parametrize("field,kwargs", [("shards", {"shards": 0}),
                                          ("replicate", {"shards": 2, "replicate": 1.5})])
def test_bad_plans_name_the_field(field, kwargs):
    with pytest.raises(ConfigError, match=field):
        plan_shards(skewed_sizes(), **kwargs)


@pytest.mark.parametrize("metric", ["l2", "ip"])
def test_replaying_the_heap_in_scan_order_is_faiss(tie_vectors, metric, host):
    """The tie-break the sharded engine relies on: faiss's heap fed each probe list's elements
    in storage order keeps exactly the ids `index.search` returns."""
    from ragraph.runtime.retrieval.ivf.engine import FaissIVFEngine

    rng = np.random.default_rng(3)
    ids = rng.permutation(tie_vectors.shape[0]).astype(np.int64)
    engine = FaissIVFEngine(make_ivf(tie_vectors, 16, metric, ids=ids))
    queries = queries_from(rng, tie_vectors, 20)
    want_d, want_i = engine.search(queries, 6, 8)
    for q, probe, d, i in zip(queries, engine.probe(queries, 8), want_d, want_i, strict=True):
        scanned = [engine.scan_list(q, c) for c in probe.tolist()]
        got = replay_heap(np.concatenate([s[0] for s in scanned]),
                          np.concatenate([s[1] for s in scanned]), 6, engine.metric, probe)
        np.testing.assert_array_equal(got.ids, i)
        np.testing.assert_array_equal(got.distances, d)
