"""Cutting a search step's rows over the OpenMP threads: coverage, block shape, balance."""

from __future__ import annotations

import numpy as np
import pytest

from ragraph.runtime.retrieval.split import balance


def covered(layout, n_tasks):
    got = [[] for _ in range(n_tasks)]
    for owner, clusters in zip(layout.owner, layout.clusters, strict=True):
        if owner >= 0:
            got[owner] += clusters.tolist()
        else:
            assert clusters.size == 0  # padding rows scan nothing
    return got


@pytest.mark.parametrize("threads", [2, 3, 4, 8])
def test_every_cluster_once_in_equal_blocks(threads):
    rng = np.random.default_rng(threads)
    sizes = rng.integers(0, 2000, size=512)
    tasks = [rng.choice(512, size=n, replace=False) for n in (128, 3, 40, 1, 0, 7)]
    layout = balance(tasks, sizes, threads)
    assert len(layout.owner) % threads == 0  # faiss deals rows in equal contiguous blocks
    for want, got in zip(tasks, covered(layout, len(tasks)), strict=True):
        assert sorted(got) == sorted(want.tolist())
    width = len(layout.owner) // threads
    loads = [sum(sizes[c].sum() + len(c) for c in layout.clusters[b * width:(b + 1) * width])
             for b in range(threads)]
    total = sum(sizes[t].sum() + len(t) for t in tasks)
    # No thread gets more than its share plus one cluster (pieces cut at cluster bounds).
    assert max(loads) <= total / threads + sizes.max() + 1


def test_one_long_task_is_cut_in_scan_order():
    sizes = np.full(64, 100)
    task = np.arange(64)[::-1].copy()
    layout = balance([task], sizes, 2)
    assert layout.split
    pieces = [c for o, c in zip(layout.owner, layout.clusters, strict=True) if o == 0]
    assert len(pieces) == 2
    assert np.array_equal(np.concatenate(sorted(pieces, key=lambda p: -p[0])), task)


def test_one_thread_or_no_work_keeps_the_tasks():
    sizes = np.full(8, 10)
    tasks = [np.array([1, 2]), np.array([3])]
    for layout in (balance(tasks, sizes, 1), balance([np.empty(0, np.int64)], sizes, 4)):
        assert not layout.split
