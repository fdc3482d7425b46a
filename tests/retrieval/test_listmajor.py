"""List-major scans equal faiss `index.search`: ids and distances bit for bit, any split, any
thread count, exact ties and near-ties included; and steps take that path when lists are shared."""

from __future__ import annotations

import numpy as np
import pytest

from ragraph.runtime.retrieval.ivf import listmajor
from ragraph.runtime.retrieval.ivf.engine import FaissIVFEngine
from ragraph.runtime.retrieval.ivf.split import last_level_cache_bytes
from ragraph.runtime.retrieval.protocol import ScanOrder, SearchTask

from .helpers import make_ivf, queries_from
from .test_stepwise import assert_identical, reference, stepwise


@pytest.fixture
def always_list_major(monkeypatch, host_matmul):
    """List-order steps go list-major however few queries share their lists, with each library
    computing the products."""
    monkeypatch.setattr(listmajor, "MIN_SHARING", dict.fromkeys(listmajor.MIN_SHARING, 0.0))


@pytest.mark.parametrize("threads", [1, 2, 3, 5])
@pytest.mark.parametrize("nprobe,n_steps", [(1, 1), (8, 3), (32, 1), (64, 9)])
def test_list_major_equals_faiss(random_engine, random_vectors, omp_threads, threads, nprobe,
                                 n_steps, always_list_major):
    omp_threads(threads)
    rng = np.random.default_rng(threads * 1000 + nprobe + n_steps)
    queries = queries_from(rng, random_vectors, 40)
    want = reference(random_engine, queries, 10, nprobe)
    got = stepwise(random_engine, queries, 10, nprobe, n_steps, rng, scan=ScanOrder.LIST)
    assert_identical(got, want)


def test_partials_equal_faiss_partials(random_engine, random_vectors, always_list_major):
    """Step by step, not only after the merge: each task's top-(k+1) is faiss's, tasks without
    clusters or with fewer than k+1 elements included."""
    rng = np.random.default_rng(7)
    queries = queries_from(rng, random_vectors, 12)
    probe = random_engine.probe(queries, 24)
    tasks = [SearchTask.of(q, p[: 1 + i * 2]) for i, (q, p) in enumerate(zip(queries, probe,
                                                                            strict=True))]
    tasks.append(SearchTask.of(queries[0], []))
    step = random_engine.search_step(tasks, 150, ScanOrder.LIST)
    assert step.stats.list_major
    for got, want in zip(step.partials, random_engine.search_step(tasks, 150, ScanOrder.QUERY)
                         .partials, strict=True):
        np.testing.assert_array_equal(got.ids, want.ids)
        np.testing.assert_array_equal(got.distances, want.distances)


@pytest.mark.parametrize("metric", ["l2", "ip"])
def test_exact_ties_break_like_faiss(tie_vectors, metric, always_list_major):
    rng = np.random.default_rng(2)
    ids = rng.permutation(tie_vectors.shape[0]).astype(np.int64)
    engine = FaissIVFEngine(make_ivf(tie_vectors, 16, metric, ids=ids), cache_bytes=0)
    queries = np.concatenate([tie_vectors[::97][:12], queries_from(rng, tie_vectors, 12)])
    for k, nprobe, n_steps in [(3, 4, 2), (6, 8, 4), (10, 16, 1)]:
        want = reference(engine, queries, k, nprobe)
        assert_identical(stepwise(engine, queries, k, nprobe, n_steps, rng, scan=ScanOrder.LIST),
                         want)


def near_ties(metric: str) -> tuple[np.ndarray, np.ndarray]:
    """Vectors a rounding error apart around one far point: float32 products order them
    differently from faiss's kernel, so only the bound and the re-scoring keep results exact."""
    rng = np.random.default_rng(3)
    base = rng.standard_normal(32).astype(np.float32) * 50
    spread = 1e-4 if metric == "l2" else 3e-4
    x = (base + spread * rng.standard_normal((3000, 32))).astype(np.float32)
    q = (base + spread * rng.standard_normal((24, 32))).astype(np.float32)
    return x, q


@pytest.mark.parametrize("metric", ["l2", "ip"])
def test_near_ties_need_the_bound(metric, omp_threads, always_list_major):
    omp_threads(2)
    x, q = near_ties(metric)
    engine = FaissIVFEngine(make_ivf(x, 8, metric), cache_bytes=0)
    want = reference(engine, q, 10, 4)
    rng = np.random.default_rng(4)
    assert_identical(stepwise(engine, q, 10, 4, 2, rng, scan=ScanOrder.LIST), want)
    # The products alone would get these wrong: the test exercises the bound.
    probe = engine.probe(q, 4)
    naive = []
    for row, p in zip(q, probe, strict=True):
        vecs = np.concatenate([engine.list_vectors(c) for c in p])
        ids = np.concatenate([engine.list_ids(c) for c in p])
        score = vecs @ row if metric == "ip" else (vecs * vecs).sum(1) - 2 * (vecs @ row)
        naive.append(ids[np.argsort(-score if metric == "ip" else score, kind="stable")[:10]])
    assert not np.array_equal(np.stack(naive), want[1])


def test_many_chunks_share_thresholds_exactly(random_engine, random_vectors, monkeypatch,
                                              omp_threads, always_list_major):
    """Tiny chunks: each task's threshold is combined over many chunks before re-scoring."""
    omp_threads(3)
    monkeypatch.setattr(listmajor, "CHUNK_ELEMENTS", 64)
    rng = np.random.default_rng(9)
    queries = queries_from(rng, random_vectors, 30)
    want = reference(random_engine, queries, 10, 48)
    assert_identical(stepwise(random_engine, queries, 10, 48, 2, rng, scan=ScanOrder.LIST), want)


def test_shared_lists_take_the_list_major_path(random_engine, random_vectors, host):
    """A list-order step whose lists are probed by many queries reads each once; one query per
    list stays on faiss's own scan, and so do the other orders; and where the lists fit in half
    the host's last-level cache, so does the step."""
    rng = np.random.default_rng(11)
    queries = queries_from(rng, random_vectors, 32)
    probe = random_engine.probe(queries, 16)
    shared = [SearchTask.of(q, p) for q, p in zip(queries, probe, strict=True)]
    assert random_engine.search_step(shared, 10, ScanOrder.LIST).stats.list_major
    alone = [SearchTask.of(queries[0], probe[0])]
    assert not random_engine.search_step(alone, 10, ScanOrder.LIST).stats.list_major
    for order in (ScanOrder.QUERY, ScanOrder.BALANCED, ScanOrder.CLUSTER):
        assert not random_engine.search_step(shared, 10, order).stats.list_major
    # 6,000 vectors of dimension 24 (576 KB) fit in half of 105 MB, not of 512 KB: where they
    # fit, faiss re-reads them from cache.
    on_host = FaissIVFEngine(random_engine.index)
    fits = random_vectors.nbytes <= last_level_cache_bytes() // 2
    assert on_host.search_step(shared, 10, ScanOrder.LIST).stats.list_major is not fits


def test_sq8_falls_back_to_faiss_scans(random_vectors, always_list_major):
    engine = FaissIVFEngine(make_ivf(random_vectors, 32, "l2", kind="sq8"), cache_bytes=0)
    rng = np.random.default_rng(3)
    queries = queries_from(rng, random_vectors, 30)
    probe = engine.probe(queries, 12)
    step = engine.search_step([SearchTask.of(q, p) for q, p in zip(queries, probe, strict=True)],
                              10, ScanOrder.LIST)
    assert not step.stats.list_major
    got = stepwise(engine, queries, 10, 12, 3, rng, scan=ScanOrder.LIST)
    assert_identical(got, reference(engine, queries, 10, 12))


def test_real_passages_list_major(musique_index, embedder, data_dir, always_list_major):
    from .test_real_data import nq_questions

    vectors, index = musique_index
    engine = FaissIVFEngine(index, cache_bytes=0)
    queries = embedder.embed(nq_questions(data_dir, 48))
    rng = np.random.default_rng(12)
    for nprobe, n_steps in [(4, 1), (16, 3)]:
        want = reference(engine, queries, 10, nprobe)
        assert_identical(stepwise(engine, queries, 10, nprobe, n_steps, rng,
                                  scan=ScanOrder.LIST), want)
