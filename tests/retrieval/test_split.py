"""Laying a search step's rows out over the OpenMP threads (coverage, block shape, balance, cluster
order) and merging each task's rows back."""

from __future__ import annotations

import numpy as np
import pytest

from ragraph.runtime.retrieval.ivf.split import balance, by_cluster, last_level_cache_bytes
from ragraph.runtime.retrieval.merge import merge_partials, merge_rows
from ragraph.runtime.retrieval.protocol import Metric, TopK


def rows(layout):
    return [layout.clusters(r) for r in range(len(layout.owner))]


def covered(layout, n_tasks):
    got = [[] for _ in range(n_tasks)]
    for owner, clusters in zip(layout.owner, rows(layout), strict=True):
        if owner >= 0:
            got[owner] += clusters.tolist()
        else:
            assert clusters.size == 0  # padding rows scan nothing
    return got


def assert_covered_in_balanced_blocks(layout, tasks, sizes, threads):
    assert len(layout.owner) % threads == 0  # faiss deals rows in equal contiguous blocks
    for want, got in zip(tasks, covered(layout, len(tasks)), strict=True):
        assert sorted(got) == sorted(want.tolist())
    width = len(layout.owner) // threads
    loads = [sum(sizes[c].sum() + len(c) for c in rows(layout)[b * width:(b + 1) * width])
             for b in range(threads)]
    total = sum(sizes[t].sum() + len(t) for t in tasks)
    # No thread gets more than its share plus one cluster (pieces cut at cluster bounds).
    assert max(loads) <= total / threads + sizes.max() + 1


@pytest.mark.parametrize("threads", [2, 3, 4, 8])
def test_every_cluster_once_in_equal_blocks(threads):
    rng = np.random.default_rng(threads)
    sizes = rng.integers(0, 2000, size=512)
    tasks = [rng.choice(512, size=n, replace=False) for n in (128, 3, 40, 1, 0, 7)]
    assert_covered_in_balanced_blocks(balance(tasks, sizes, threads), tasks, sizes, threads)


def test_one_long_task_is_cut_in_scan_order():
    sizes = np.full(64, 100)
    task = np.arange(64)[::-1].copy()
    layout = balance([task], sizes, 2)
    assert layout.split
    pieces = [c for o, c in zip(layout.owner, rows(layout), strict=True) if o == 0]
    assert len(pieces) == 2
    assert np.array_equal(np.concatenate(sorted(pieces, key=lambda p: -p[0])), task)


def test_one_thread_or_no_work_keeps_the_tasks():
    sizes = np.full(8, 10)
    tasks = [np.array([1, 2]), np.array([3])]
    for layout in (balance(tasks, sizes, 1), balance([np.empty(0, np.int64)], sizes, 4)):
        assert not layout.split


@pytest.mark.parametrize("threads", [1, 2, 3, 4])
def test_by_cluster_rows_are_single_clusters_in_cluster_order(threads):
    rng = np.random.default_rng(threads)
    sizes = rng.integers(0, 2000, size=256)
    tasks = [rng.choice(256, size=n, replace=False) for n in (64, 3, 0, 40, 1, 64)]
    layout = by_cluster(tasks, sizes, threads)
    assert_covered_in_balanced_blocks(layout, tasks, sizes, threads)
    assert layout.assign.shape[1] == 1
    real = [(int(c[0]), o) for o, c in zip(layout.owner, rows(layout), strict=True) if c.size]
    assert real == sorted(real)  # queries sharing a list scan it back to back
    assert 2 in layout.owner  # the task without clusters still has a row


@pytest.mark.parametrize("metric", [Metric.L2, Metric.IP])
def test_rows_merged_at_once_equal_merging_each_task(metric):
    """`merge_rows` (one sort for a whole step) gives each owner what `merge_partials` gives
    its rows: ties by id, missing entries, padding rows and owners without rows included."""
    rng = np.random.default_rng(3)
    rows, m, n = 40, 4, 7
    owner = rng.integers(-1, n - 1, size=rows)  # owner n - 1 has no rows
    dist = rng.integers(0, 6, size=(rows, m)).astype(np.float32)  # many exact ties
    ids = rng.permutation(rows * m).reshape(rows, m).astype(np.int64)
    ids[rng.random((rows, m)) < 0.2] = -1
    got_d, got_i = merge_rows(owner, dist, ids, n, m, metric)
    for t in range(n):
        parts = [TopK(dist[r], ids[r], np.empty(0, np.int64)) for r in np.flatnonzero(owner == t)]
        want = merge_partials(parts, m, metric).topk
        np.testing.assert_array_equal(got_i[t], want.ids)
        np.testing.assert_array_equal(got_d[t], want.distances)


def test_last_level_cache_from_sysfs(tmp_path):
    for index, size in (("index0", "48K"), ("index2", "2048K"), ("index3", "105M")):
        (tmp_path / index).mkdir()
        (tmp_path / index / "size").write_text(size + "\n")
    assert last_level_cache_bytes(tmp_path) == 105 * 2**20
    assert last_level_cache_bytes(tmp_path / "missing") == 32 * 2**20
