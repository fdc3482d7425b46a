"""Stepwise search equals faiss `index.search`: ids and distances, any splitting, any order."""

from __future__ import annotations

import numpy as np
import pytest

from ragraph.errors import ConfigError, SearchIndexError
from ragraph.runtime.retrieval.ivf.engine import FaissIVFEngine
from ragraph.runtime.retrieval.merge import merge_partials
from ragraph.runtime.retrieval.protocol import Metric, ScanOrder, SearchEngine, SearchTask, TopK

from .helpers import faiss, make_ivf, queries_from


def stepwise(engine, queries, k, nprobe, n_steps, rng, shuffle=True, scan=ScanOrder.BALANCED):
    """All queries advance together: step j searches chunk j of every query's (shuffled) probes."""
    probe = engine.probe(queries, nprobe)
    chunks = []
    for row in probe:
        order = rng.permutation(row) if shuffle else row
        cuts = np.sort(rng.choice(np.arange(1, nprobe), size=n_steps - 1, replace=False))
        chunks.append([c for c in np.split(order, cuts) if c.size])
    partials = [[] for _ in queries]
    for j in range(max(len(c) for c in chunks)):
        live = [i for i, c in enumerate(chunks) if j < len(c)]
        tasks = [SearchTask.of(queries[i], chunks[i][j]) for i in live]
        for i, part in zip(live, engine.search_step(tasks, k, scan).partials,
                                  strict=True):
            partials[i].append(part)
    results = [
        engine.finish(q, p, parts, k) for q, p, parts in zip(queries, probe, partials, strict=True)
    ]
    return np.stack([r.distances for r in results]), np.stack([r.ids for r in results])


def reference(engine, queries, k, nprobe):
    index = engine.index
    index.nprobe = nprobe
    return index.search(queries, k)


def assert_identical(got, want):
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[0], want[0])  # bit-for-bit, not approximately


def test_engine_satisfies_protocol(random_engine):
    assert isinstance(random_engine, SearchEngine)


@pytest.mark.parametrize("nprobe,n_steps", [(1, 1), (8, 1), (8, 8), (16, 3), (32, 5), (64, 9)])
def test_random_data_any_split_any_order(random_engine, random_vectors, nprobe, n_steps):
    rng = np.random.default_rng(nprobe * 100 + n_steps)
    queries = queries_from(rng, random_vectors, 40)
    want = reference(random_engine, queries, 10, nprobe)
    assert_identical(stepwise(random_engine, queries, 10, nprobe, n_steps, rng), want)
    assert_identical(random_engine.search(queries, 10, nprobe), want)


def test_probe_order_and_reverse_order(random_engine, random_vectors):
    rng = np.random.default_rng(5)
    queries = queries_from(rng, random_vectors, 20)
    want = reference(random_engine, queries, 5, 16)
    assert_identical(stepwise(random_engine, queries, 5, 16, 4, rng, shuffle=False), want)
    probe = random_engine.probe(queries, 16)
    for q, row, d, i in zip(queries, probe, *want, strict=True):
        parts = [random_engine.search_step([SearchTask.of(q, [c])], 5).partials[0] for c in row]
        got = random_engine.finish(q, row, parts[::-1], 5)
        np.testing.assert_array_equal(got.ids, i)
        np.testing.assert_array_equal(got.distances, d)


@pytest.mark.parametrize("metric", ["l2", "ip"])
def test_exact_ties_break_like_faiss(tie_vectors, metric, host):
    """Duplicated vectors under shuffled ids: faiss's choice among tied ids depends on its scan
    order, and the stepwise engine must reproduce it from partials searched in any order."""
    rng = np.random.default_rng(2)
    ids = rng.permutation(tie_vectors.shape[0]).astype(np.int64)
    engine = FaissIVFEngine(make_ivf(tie_vectors, 16, metric, ids=ids))
    queries = np.concatenate([tie_vectors[::97][:12], queries_from(rng, tie_vectors, 12)])
    for k, nprobe, n_steps in [(3, 4, 2), (6, 8, 4), (10, 16, 7)]:
        want = reference(engine, queries, k, nprobe)
        assert_identical(stepwise(engine, queries, k, nprobe, n_steps, rng), want)


def test_sq8_index(random_vectors):
    engine = FaissIVFEngine(make_ivf(random_vectors, 32, "l2", kind="sq8"))
    rng = np.random.default_rng(3)
    queries = queries_from(rng, random_vectors, 30)
    assert_identical(stepwise(engine, queries, 10, 12, 4, rng), reference(engine, queries, 10, 12))


def test_fewer_results_than_k_pads_like_faiss(random_vectors):
    engine = FaissIVFEngine(make_ivf(random_vectors[:300], 30, "l2"))
    rng = np.random.default_rng(4)
    queries = queries_from(rng, random_vectors[:300], 5)
    want = reference(engine, queries, 50, 2)
    assert (want[1] == -1).any()
    assert_identical(stepwise(engine, queries, 50, 2, 2, rng), want)


def test_merge_orders_ties_by_id_like_faiss():
    parts = [
        TopK(np.float32([1, 2, 2]), np.int64([9, 7, 3]), np.int64([0])),
        TopK(np.float32([2, 5, 9]), np.int64([1, 4, -1]), np.int64([1])),
    ]
    l2 = merge_partials(parts, 3, Metric.L2)
    assert l2.topk.ids.tolist() == [9, 1, 3] and l2.tied
    single = merge_partials([parts[0]], 2, Metric.L2)
    assert single.topk.ids.tolist() == [9, 3] and single.tied
    ip = merge_partials(parts, 2, Metric.IP)
    assert ip.topk.ids.tolist() == [4, 7] and ip.tied  # IP: larger distance, then larger id
    assert not merge_partials(parts, 1, Metric.IP).tied


def test_finish_rejects_incomplete_or_repeated_coverage(random_engine, random_vectors):
    q = random_vectors[0]
    probe = random_engine.probe(q, 4)[0]
    part = random_engine.search_step([SearchTask.of(q, probe[:2])], 5).partials[0]
    with pytest.raises(ConfigError, match="2 cluster\\(s\\) missing"):
        random_engine.finish(q, probe, [part], 5)
    with pytest.raises(ConfigError, match="searched twice"):
        random_engine.finish(q, probe[:2], [part, part], 5)


def test_bad_inputs_are_clear_errors(random_engine):
    with pytest.raises(SearchIndexError, match="query dimension 7"):
        random_engine.probe(np.zeros((1, 7), np.float32), 4)
    with pytest.raises(ConfigError, match="nprobe"):
        random_engine.probe(np.zeros((1, random_engine.dim), np.float32), 0)
    with pytest.raises(ConfigError, match="clusters"):
        random_engine.search_step([SearchTask.of(np.zeros(random_engine.dim), [10_000])], 5)
    with pytest.raises(SearchIndexError, match="IndexIVF"):
        FaissIVFEngine(faiss.IndexFlatL2(4))


def test_step_is_one_multithreaded_call(random_engine, random_vectors):
    assert random_engine.index.parallel_mode == 3  # split over queries, one ordered scan each
    rng = np.random.default_rng(6)
    queries = queries_from(rng, random_vectors, 8)
    probe = random_engine.probe(queries, 8)
    step = random_engine.search_step(
        [SearchTask.of(q, p[:3]) for q, p in zip(queries, probe, strict=True)], 4
    )
    sizes = random_engine.cluster_sizes()
    assert step.stats.vectors_scanned == int(sum(sizes[p[:3]].sum() for p in probe))
    assert [len(p) for p in step.partials] == [5] * 8  # k + 1 per partial


def test_tie_case_is_real_and_detected(tie_vectors):
    """Without the re-scan, merging partials in reverse probe order picks other tied ids."""
    rng = np.random.default_rng(1)
    ids = rng.permutation(tie_vectors.shape[0]).astype(np.int64)
    engine = FaissIVFEngine(make_ivf(tie_vectors, 16, "l2", ids=ids))
    queries = tie_vectors[::97][:12]
    want = reference(engine, queries, 6, 8)
    naive_differs = 0
    for q, row, ids_want in zip(queries, engine.probe(queries, 8), want[1], strict=True):
        parts = [engine.search_step([SearchTask.of(q, [c])], 6).partials[0] for c in row[::-1]]
        merged = merge_partials(parts, 6, engine.metric)
        assert merged.tied
        naive_differs += not np.array_equal(merged.topk.ids, ids_want)
        np.testing.assert_array_equal(engine.finish(q, row, parts, 6).ids, ids_want)
    assert naive_differs > 0


def test_matches_faiss_default_parallel_mode(random_engine, random_vectors):
    """The engine runs its index in parallel_mode 3; faiss's default mode 0 gives the same."""
    default = faiss.clone_index(random_engine.index)
    default.parallel_mode = 0
    default.nprobe = 24
    rng = np.random.default_rng(8)
    queries = queries_from(rng, random_vectors, 64)
    assert_identical(stepwise(random_engine, queries, 10, 24, 5, rng), default.search(queries, 10))


@pytest.mark.parametrize("order", [ScanOrder.BALANCED, ScanOrder.CLUSTER])
@pytest.mark.parametrize("threads", [1, 2, 3, 5])
def test_step_layouts_change_no_result(random_engine, random_vectors, omp_threads, threads, order):
    """A step of one long task and a few short ones, cut over the threads (`balanced`) or one
    row per cluster in cluster order (`cluster`): every partial holds what the task's single
    row holds, and whole searches equal faiss's."""
    omp_threads(threads)
    rng = np.random.default_rng(threads)
    queries = queries_from(rng, random_vectors, 6)
    probe = random_engine.probe(queries, 32)
    tasks = [SearchTask.of(queries[0], probe[0])] + [
        SearchTask.of(q, p[:2]) for q, p in zip(queries[1:], probe[1:], strict=True)]
    tasks.append(SearchTask.of(queries[1], []))  # a task with no clusters gets an empty partial
    laid = random_engine.search_step(tasks, 10, order).partials
    alone = random_engine.search_step(tasks, 10, ScanOrder.QUERY).partials
    for got, want, task in zip(laid, alone, tasks, strict=True):
        np.testing.assert_array_equal(got.ids, want.ids)
        np.testing.assert_array_equal(got.distances, want.distances)
        np.testing.assert_array_equal(np.sort(got.clusters), np.sort(task.clusters))
    want = reference(random_engine, queries, 10, 32)
    assert_identical(stepwise(random_engine, queries, 10, 32, 4, rng, scan=order), want)


@pytest.mark.parametrize("order", [ScanOrder.BALANCED, ScanOrder.CLUSTER])
def test_step_layouts_keep_exact_ties(tie_vectors, omp_threads, order):
    """Every vector four times: a task's rows are merged like partials, and `finish` re-scans
    the tied queries, so results stay faiss's."""
    omp_threads(4)
    ids = np.random.default_rng(2).permutation(tie_vectors.shape[0]).astype(np.int64)
    engine = FaissIVFEngine(make_ivf(tie_vectors, 16, "l2", ids=ids), cache_bytes=0)
    queries = tie_vectors[::97][:12]
    want = reference(engine, queries, 6, 8)
    probe = engine.probe(queries, 8)
    step = engine.search_step([SearchTask.of(q, row) for q, row in zip(queries, probe, strict=True)],
                              6, order)
    for q, row, partial, d, i in zip(queries, probe, step.partials, *want, strict=True):
        got = engine.finish(q, row, [partial], 6)
        np.testing.assert_array_equal(got.ids, i)
        np.testing.assert_array_equal(got.distances, d)


def test_cluster_order_only_where_the_lists_outgrow_the_cache(random_vectors):
    """Rows per (query, list) cost more than they save while every list stays cached anyway."""
    index = make_ivf(random_vectors, 16, "l2")
    queries = queries_from(np.random.default_rng(4), random_vectors, 4)
    tasks = [SearchTask.of(q, p) for q, p in zip(queries, FaissIVFEngine(index).probe(queries, 8),
                                                  strict=True)]
    clusters = [t.clusters for t in tasks]
    flat = np.concatenate(clusters)
    small = FaissIVFEngine(index)._layout(clusters, flat, ScanOrder.CLUSTER)
    assert small.assign.shape[1] > 1  # 6,000 vectors of dimension 24 fit in any cache
    large = FaissIVFEngine(index, cache_bytes=0)._layout(clusters, flat, ScanOrder.CLUSTER)
    assert large.assign.shape[1] == 1 and len(large.owner) >= 32
