"""Budgeted search cycles (`search_worker.run_cycle`) over real faiss: retrievals left behind by
the budget join the lists a step scans, out of their own order, and every retrieval still ends
with exactly faiss's top-k."""

from __future__ import annotations

import numpy as np
import pytest

from ragraph.runtime.retrieval.cost import CostModel
from ragraph.runtime.scheduler.search_worker import ScanItem, run_cycle

from .fakes import random_search


def test_cycles_with_shared_lists_end_in_faiss_results():
    search = random_search(nprobe=24)
    vectors = search.embedder.embed([f"question {i}" for i in range(12)])
    probes = search.engine.probe(vectors, 24)
    cost = CostModel(tuple(int(s) for s in search.engine.cluster_sizes()), search.engine.dim)
    items = {i: ScanItem(i, 5, True, v, p, tuple(int(c) for c in p))
             for i, (v, p) in enumerate(zip(vectors, probes, strict=True))}
    finals, out_of_order = {}, 0
    while items:
        # A budget of a few clusters: most retrievals are left behind each cycle.
        cycle = run_cycle(search, list(items.values()), 4 * cost.mean_cluster_ms, cost)
        for r in cycle.results:
            item = items[r.key]
            out_of_order += r.searched != item.remaining[:len(r.searched)]
            if r.final is not None:
                finals[r.key] = r.final
                del items[r.key]
            else:
                items[r.key] = ScanItem(r.key, 5, True, item.vector, item.probe, r.remaining,
                                        item.partials + (r.partial,) if r.partial else item.partials)
    assert out_of_order > 0  # the shared lists were scanned ahead of their turn
    index = search.engine.index
    index.nprobe = 24
    want_d, want_i = index.search(vectors, 5)
    for i in range(len(vectors)):
        np.testing.assert_array_equal(finals[i].ids, want_i[i])
        np.testing.assert_array_equal(finals[i].distances, want_d[i])


def test_a_cycle_prices_each_k_as_its_own_step():
    """Retrievals with different k are scanned in separate engine calls: a list they share is
    scanned twice, not once and then from cache."""
    search = random_search(nprobe=4)
    vectors = search.embedder.embed(["first question", "second question"])
    cost = CostModel(tuple(int(s) for s in search.engine.cluster_sizes()), search.engine.dim)
    probe = search.engine.probe(vectors[:1], 4)[0]
    lists = tuple(int(c) for c in probe)

    def cycle_ms(ks: tuple[int, int]) -> float:
        items = [ScanItem(i, k, False, v, probe, lists)
                 for i, (k, v) in enumerate(zip(ks, vectors, strict=True))]
        return run_cycle(search, items, float("inf"), cost).predicted_ms

    once = cost.clusters_ms(lists)
    assert cycle_ms((5, 5)) < 2 * once  # one step: the second query's lists are rescans
    assert cycle_ms((5, 3)) == pytest.approx(2 * once)
