"""Budgeted search cycles (`search_worker.run_cycle`) over real faiss: retrievals left behind by
the budget join the lists a step scans, out of their own order, and every retrieval still ends
with exactly faiss's top-k."""

from __future__ import annotations

import numpy as np
import pytest

from ragraph.runtime.retrieval.ivf.cost import SearchCostModel
from ragraph.runtime.scheduler.search_worker import ScanItem, SplitCheck, run_cycle

from .fakes import random_search


def _items(search, n: int, nprobe: int) -> list[ScanItem]:
    vectors = search.embedder.embed([f"question {i}" for i in range(n)])
    probes = search.engine.probe(vectors, nprobe)
    return [ScanItem(i, 5, True, v, p, tuple(int(c) for c in p))
            for i, (v, p) in enumerate(zip(vectors, probes, strict=True))]


def run_to_end(search, items: list[ScanItem], budget_ms: float, cost: SearchCostModel,
               split: SplitCheck | None = None) -> tuple[dict, int]:
    """Cycles until every retrieval has its final top-k; how many took a list ahead of its turn."""
    pending = {i.key: i for i in items}
    finals, out_of_order = {}, 0
    while pending:
        cycle = run_cycle(search, list(pending.values()), budget_ms, cost, split)
        for r in cycle.results:
            item = pending[r.key]
            out_of_order += r.searched != item.remaining[:len(r.searched)]
            if r.final is not None:
                finals[r.key] = r.final
                del pending[r.key]
            else:
                pending[r.key] = ScanItem(r.key, 5, True, item.vector, item.probe, r.remaining,
                                          item.partials + r.partials)
    return finals, out_of_order


def assert_faiss_results(search, items: list[ScanItem], finals: dict, nprobe: int) -> None:
    index = search.engine.index
    index.nprobe = nprobe
    want_d, want_i = index.search(np.stack([i.vector for i in items]), 5)
    for n, item in enumerate(items):
        np.testing.assert_array_equal(finals[item.key].ids, want_i[n])
        np.testing.assert_array_equal(finals[item.key].distances, want_d[n])


def test_cycles_with_shared_lists_end_in_faiss_results():
    search = random_search(nprobe=24)
    items = _items(search, 12, 24)
    cost = SearchCostModel(tuple(int(s) for s in search.engine.cluster_sizes()), search.engine.dim)
    # A budget of a few clusters: most retrievals are left behind each cycle.
    finals, out_of_order = run_to_end(search, items, 4 * cost.mean_cluster_ms, cost)
    assert out_of_order > 0  # the shared lists were scanned ahead of their turn
    assert_faiss_results(search, items, finals, 24)


def test_a_cycle_prices_each_k_as_its_own_step():
    """Retrievals with different k are scanned in separate engine calls: a list they share is
    scanned twice, not once and then from cache."""
    search = random_search(nprobe=4)
    vectors = search.embedder.embed(["first question", "second question"])
    cost = SearchCostModel(tuple(int(s) for s in search.engine.cluster_sizes()), search.engine.dim)
    probe = search.engine.probe(vectors[:1], 4)[0]
    lists = tuple(int(c) for c in probe)

    def cycle_ms(ks: tuple[int, int]) -> float:
        items = [ScanItem(i, k, False, v, probe, lists)
                 for i, (k, v) in enumerate(zip(ks, vectors, strict=True))]
        return run_cycle(search, items, float("inf"), cost).predicted_ms

    once = cost.clusters_ms(lists)
    assert cycle_ms((5, 5)) < 2 * once  # one step: the second query's lists are rescans
    assert cycle_ms((5, 3)) == pytest.approx(2 * once)


def test_a_step_takes_every_retrieval_whole_where_the_split_costs_the_waiting_more():
    """Sixteen retrievals sharing most of their lists: a budget that finishes none of them
    would read the shared lists again next step, so the step takes them all whole; with a
    given budget (`split=None`), or where the queue is empty and sharing is priced at nothing,
    the budget stands."""
    search = random_search(nprobe=24)
    items = _items(search, 16, 24)
    sizes = tuple(int(s) for s in search.engine.cluster_sizes())
    shared = SearchCostModel(sizes, search.engine.dim, rescan_share=0.1)
    budget = 4 * shared.mean_cluster_ms
    whole = run_cycle(search, items, budget, shared, SplitCheck(waiting=8, beta_ms=0.5))
    assert all(r.final is not None for r in whole.results)
    given = run_cycle(search, items, budget, shared)
    assert sum(r.final is not None for r in given.results) < len(items)
    # No sharing to lose (a rescan costs a full scan) and no overhead: a budget that finishes
    # one of two retrievals stands; one that finishes none never pays.
    alone = SearchCostModel(sizes, search.engine.dim, rescan_share=1.0)
    first = min(alone.clusters_ms(i.remaining) for i in items[:2])
    staged = run_cycle(search, items[:2], first * 1.01, alone, SplitCheck())
    assert sum(r.final is not None for r in staged.results) == 1
    none = run_cycle(search, items[:2], first / 2, alone, SplitCheck())
    assert sum(r.final is not None for r in none.results) == 2


def test_whole_steps_chosen_by_the_split_rule_end_in_faiss_results():
    search = random_search(nprobe=24)
    items = _items(search, 12, 24)
    cost = SearchCostModel(tuple(int(s) for s in search.engine.cluster_sizes()), search.engine.dim)
    finals, _ = run_to_end(search, items, 2 * cost.mean_cluster_ms, cost, SplitCheck(waiting=12))
    assert_faiss_results(search, items, finals, 24)
