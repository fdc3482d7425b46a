"""List-major scans over lists held on a torch device, one product a chunk: ids and distances
equal faiss `index.search` bit for bit, on torch CPU tensors here and on CUDA when present."""

from __future__ import annotations

import numpy as np
import pytest

from ragraph.runtime.retrieval.ivf.engine import FaissIVFEngine
from ragraph.runtime.retrieval.protocol import ScanOrder, SearchTask
from ragraph.runtime.retrieval.tier import devicelists
from ragraph.runtime.retrieval.tier.devicelists import DeviceLists, GroupedArrays, scan_step
from ragraph.runtime.retrieval.tier.hotcache import HotCacheConfig, HotClusterCache
from ragraph.runtime.retrieval.tier.tiered import TieredEngine

from .helpers import make_ivf, queries_from
from .test_listmajor import near_ties
from .test_stepwise import assert_identical, reference, stepwise

torch = pytest.importorskip("torch")

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device: the same path runs on torch CPU "
    "tensors in the cpu cases"))]


def search(engine, lists, queries, k, nprobe, steps=1):
    """Every query's probe list in `steps` steps on the device lists, then faiss's finish."""
    probe = engine.probe(queries, nprobe)
    parts = [[] for _ in queries]
    for piece in np.array_split(np.arange(nprobe), steps):
        tasks = [SearchTask.of(q, p[piece]) for q, p in zip(queries, probe, strict=True)]
        for i, part in enumerate(scan_step(engine, lists, tasks, k)):
            parts[i].append(part)
    found = [engine.finish(q, p, ps, k) for q, p, ps in zip(queries, probe, parts, strict=True)]
    return np.stack([f.distances for f in found]), np.stack([f.ids for f in found])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("nprobe,steps", [(1, 1), (8, 3), (32, 1), (64, 4)])
def test_grouped_products_equal_faiss(random_engine, random_vectors, device, nprobe, steps):
    rng = np.random.default_rng(nprobe + steps)
    queries = queries_from(rng, random_vectors, 40)
    lists = DeviceLists.of(random_engine.index, device)
    assert lists.nbytes == random_vectors.nbytes
    assert_identical(search(random_engine, lists, queries, 10, nprobe, steps),
                     reference(random_engine, queries, 10, nprobe))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("metric", ["l2", "ip"])
def test_near_ties_and_exact_ties(device, metric, tie_vectors):
    x, q = near_ties(metric)
    engine = FaissIVFEngine(make_ivf(x, 8, metric), cache_bytes=0)
    assert_identical(search(engine, DeviceLists.of(engine.index, device), q, 10, 4),
                     reference(engine, q, 10, 4))
    rng = np.random.default_rng(2)
    ids = rng.permutation(tie_vectors.shape[0]).astype(np.int64)
    ties = FaissIVFEngine(make_ivf(tie_vectors, 16, metric, ids=ids), cache_bytes=0)
    queries = np.concatenate([tie_vectors[::97][:12], queries_from(rng, tie_vectors, 12)])
    assert_identical(search(ties, DeviceLists.of(ties.index, device), queries, 6, 8, 2),
                     reference(ties, queries, 6, 8))


def test_many_chunks_and_the_per_list_fallback_stay_exact(random_engine, random_vectors,
                                                          monkeypatch):
    """Small chunks combine thresholds over chunks; a span of lists too wide for a dense product
    goes one list at a time; both give faiss's answers."""
    rng = np.random.default_rng(3)
    queries = queries_from(rng, random_vectors, 30)
    want = reference(random_engine, queries, 10, 24)
    lists = DeviceLists.of(random_engine.index, "cpu")
    original, per_list_calls = devicelists.per_list, []
    monkeypatch.setattr(devicelists, "per_list",
                        lambda *a: per_list_calls.append(1) or original(*a))
    for chunk, dense, fallback in [(500, devicelists.DENSE_LIMIT, False), (None, 10, True)]:
        grouped = GroupedArrays(lists.device, lists.vectors.shape[1], lists=lists,
                                chunk_elements=chunk, dense_limit=dense)
        monkeypatch.setattr(GroupedArrays, "over", staticmethod(lambda _, g=grouped: g))
        per_list_calls.clear()
        assert_identical(search(random_engine, lists, queries, 10, 24), want)
        assert bool(per_list_calls) is fallback


def test_a_subset_of_lists_is_held_and_the_rest_refused(random_engine):
    held = np.array([5, 1, 9])
    lists = DeviceLists.of(random_engine.index, "cpu", held)
    sizes = random_engine.cluster_sizes()
    assert lists.nbytes == int(sizes[held].sum()) * random_engine.dim * 4
    tile = lists.tile(9)
    np.testing.assert_array_equal(tile.ids, random_engine.list_ids(9))
    np.testing.assert_array_equal(tile.vectors.numpy(), random_engine.list_vectors(9))
    with pytest.raises(KeyError, match="list 2 is not held"):
        lists.tile(2)


@pytest.mark.parametrize("device", DEVICES)
def test_the_hot_cache_joins_its_tiles_and_stays_exact(random_engine, random_vectors, device):
    """On a GPU by default (on the CPU when asked), the tier's tiles are views of one store and
    its steps one product a chunk; swaps, prefetches and releases keep results faiss's."""
    grouped = True if device == "cpu" else None
    cache = HotClusterCache(random_engine, HotCacheConfig(
        capacity=16, prefetch_capacity=8, swap_every=2, device=device, grouped=grouped))
    engine = TieredEngine(random_engine, cache)
    rng = np.random.default_rng(12)
    for owner in range(3):
        queries = queries_from(rng, random_vectors, 24)
        cache.prefetch(queries[0], 10**9, owner)
        want = reference(random_engine, queries, 10, 16)
        assert_identical(stepwise(engine, queries, 10, 16, 2, rng, scan=ScanOrder.LIST), want)
        cache.wait_for_swap()
        cache.release(owner)
    snap = cache.resident
    assert snap.lists is not None and len(snap.tiles) == 16
    assert snap.lists.nbytes == sum(t.nbytes for t in snap.tiles.values())
    store = snap.lists.vectors.untyped_storage().data_ptr()
    assert all(t.vectors.untyped_storage().data_ptr() == store for t in snap.tiles.values())
    assert cache.stats().vectors_on_accelerator > 0
    cache.close()


def test_on_the_cpu_the_tier_reads_faiss_lists_in_place_by_default(random_engine, random_vectors):
    cache = HotClusterCache(random_engine, HotCacheConfig(capacity=8, swap_every=1, device="cpu"))
    TieredEngine(random_engine, cache).search(queries_from(np.random.default_rng(1),
                                                           random_vectors, 8), 5, 16)
    cache.wait_for_swap()
    assert cache.resident.lists is None and len(cache.resident.tiles) == 8
    cache.close()
