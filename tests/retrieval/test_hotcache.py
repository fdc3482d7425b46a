"""The accelerator tier (torch, CPU device here) changes where clusters are scanned, never results."""

from __future__ import annotations

import numpy as np
import pytest

from ragraph.errors import ConfigError, SearchIndexError
from ragraph.runtime.retrieval.ivf.engine import FaissIVFEngine
from ragraph.runtime.retrieval.protocol import ScanOrder, SearchEngine, SearchTask
from ragraph.runtime.retrieval.settings import SearchConfig
from ragraph.runtime.retrieval.tier.hotcache import (
    BYTES_PER_ELEMENT,
    HotCacheConfig,
    HotClusterCache,
)
from ragraph.runtime.retrieval.tier.tiered import TieredEngine

from .helpers import make_ivf, queries_from
from .test_stepwise import assert_identical, reference, stepwise

torch = pytest.importorskip("torch")

ALL = 64  # the test engines' nlist: a prefetch room that never fills


@pytest.fixture
def tiered(random_engine):
    cache = HotClusterCache(random_engine, HotCacheConfig(capacity=16, swap_every=2, device="cpu"))
    yield TieredEngine(random_engine, cache)
    cache.close()


def test_tiered_engine_satisfies_protocol(tiered):
    assert isinstance(tiered, SearchEngine)


@pytest.mark.parametrize("scan", list(ScanOrder))
def test_exact_before_and_after_swaps(tiered, random_vectors, scan):
    rng = np.random.default_rng(10)
    for round_ in range(4):
        queries = queries_from(rng, random_vectors, 24)
        want = reference(tiered.cache._engine, queries, 10, 16)
        assert_identical(stepwise(tiered, queries, 10, 16, 3 + round_, rng, scan=scan), want)
        tiered.cache.wait_for_swap()
    stats = tiered.cache.stats()
    assert stats.swaps >= 1 and len(tiered.cache.resident.tiles) == 16
    assert 0 < stats.served_fraction < 1
    assert stats.vectors_on_accelerator > 0


def test_everything_resident_still_exact(random_engine, random_vectors):
    cache = HotClusterCache(random_engine, HotCacheConfig(capacity=64, swap_every=1, device="cpu"))
    engine = TieredEngine(random_engine, cache)
    rng = np.random.default_rng(11)
    warm = queries_from(rng, random_vectors, 64)
    engine.search(warm, 5, 64)
    cache.wait_for_swap()
    assert len(cache.resident.tiles) == 64
    queries = queries_from(rng, random_vectors, 30)
    before = cache.stats()
    assert_identical(engine.search(queries, 10, 20), reference(random_engine, queries, 10, 20))
    after = cache.stats()
    assert after.vectors_on_accelerator - before.vectors_on_accelerator == (
        after.vectors_scanned - before.vectors_scanned
    )
    cache.close()


def test_torch_distances_differ_from_faiss_but_results_do_not(random_engine, random_vectors):
    """The reason faiss re-scores candidates: float32 torch arithmetic is not faiss's."""
    ivf = random_engine.index
    q = random_vectors[:64]
    y = torch.from_numpy(random_engine.list_vectors(0))
    qt = torch.from_numpy(q)
    if random_engine.metric.value == "l2":
        t = (qt * qt).sum(1, keepdim=True) + (y * y).sum(1)[None] - 2 * qt @ y.T
        flat = __import__("faiss").IndexFlatL2(ivf.d)
    else:
        t = qt @ y.T
        flat = __import__("faiss").IndexFlatIP(ivf.d)
    flat.add(random_engine.list_vectors(0))
    d, i = flat.search(q, flat.ntotal)
    exact = np.take_along_axis(t.numpy(), i, axis=1)
    assert (exact != d).any()


def test_prefetch_loads_nearest_whole_clusters_within_budget(random_engine, random_vectors):
    cache = HotClusterCache(random_engine, HotCacheConfig(capacity=0, prefetch_capacity=ALL, device="cpu"))
    q = random_vectors[5]
    ranked = random_engine.probe(q, random_engine.nlist)[0]
    sizes = random_engine.cluster_sizes()
    row = random_engine.dim * BYTES_PER_ELEMENT  # float32 tiles
    budget = int(sizes[ranked[:3]].sum()) * row + 1
    first = cache.prefetch(q, budget, owner="req-1")
    assert first.fetched == tuple(ranked[:3].tolist()) and first.already == ()
    assert first.bytes_fetched == int(sizes[ranked[:3]].sum()) * row
    second = cache.prefetch(q, int(sizes[ranked[3:5]].sum()) * row, owner="req-1")
    assert second.already == tuple(ranked[:3].tolist())
    assert second.fetched == tuple(ranked[3:5].tolist())
    resident = set(second.fetched) | set(second.already)  # what the prefetches made resident
    assert sum(int(c) in resident for c in ranked[:8]) / 8 == pytest.approx(5 / 8)
    cache.release("req-1")
    assert len(cache.resident.tiles) == 0
    cache.close()


def test_prefetches_share_one_room_and_never_pass_it(random_engine, random_vectors):
    """TeleRAG's byte budget (the link's bandwidth times a generation) can span an index: the
    room, not the budget, bounds what prefetches keep resident, for all owners together."""
    cache = HotClusterCache(random_engine, HotCacheConfig(capacity=0, prefetch_capacity=5,
                                                          device="cpu"))
    q = random_vectors[5]
    ranked = random_engine.probe(q, random_engine.nlist)[0].tolist()
    first = cache.prefetch(q, 10**12, owner="a")
    assert first.fetched == tuple(ranked[:5]) and cache.prefetch_room() == 0
    second = cache.prefetch(q, 10**12, owner="b")
    assert second.fetched == () and second.already == tuple(ranked[:5])
    cache.release("a")  # b shares what it found prefetched: it stays resident
    assert set(cache.resident.tiles) == set(ranked[:5]) and cache.prefetch_room() == 0
    cache.release("b")
    assert not cache.resident.tiles and cache.prefetch_room() == 5
    for i, other in enumerate(random_vectors[100:120]):
        cache.prefetch(other, 10**12, owner=i)
        assert len(cache.resident.tiles) <= 5
    cache.close()


def test_hot_clusters_do_not_take_prefetch_room(random_engine, random_vectors):
    cache = HotClusterCache(random_engine, HotCacheConfig(capacity=4, prefetch_capacity=3,
                                                          swap_every=1, device="cpu"))
    engine = TieredEngine(random_engine, cache)
    q = random_vectors[7]
    engine.search(q[None], 5, 4)
    cache.wait_for_swap()
    hot = cache.resident.hot
    assert len(hot) == 4
    report = cache.prefetch(q, 10**12, owner="r")
    assert set(report.already) >= hot and len(report.fetched) == 3
    assert len(cache.resident.tiles) == 7 and cache.prefetch_room() == 0
    cache.close()


def test_hot_set_holds_the_clusters_that_carried_the_most_work(random_engine, random_vectors):
    """A small list probed often saves the tier less than a large one probed a little less."""
    sizes = random_engine.cluster_sizes()
    order = np.argsort(sizes, kind="stable")
    small, large = int(order[0]), int(order[-1])
    assert 3 * sizes[small] < 2 * sizes[large]
    cache = HotClusterCache(random_engine, HotCacheConfig(capacity=1, swap_every=5,
                                                          device="cpu"))
    engine = TieredEngine(random_engine, cache)
    q = random_vectors[0]
    for cluster in (small, small, small, large, large):
        engine.search_step([SearchTask.of(q, np.array([cluster]))], 3)
    cache.wait_for_swap()
    assert cache.resident.hot == frozenset({large})
    stats = cache.stats()
    assert stats.resident_vectors == sizes[large] and stats.index_vectors == sizes.sum()
    assert stats.resident_fraction == pytest.approx(sizes[large] / sizes.sum())
    cache.close()


def test_a_tier_is_its_hot_set_and_its_prefetch_room():
    config = HotCacheConfig.of(SearchConfig(hot_fraction=0.2), nlist=4096)  # 819 clusters
    assert config.capacity + config.prefetch_capacity == 819
    assert config.prefetch_capacity == 102
    with pytest.raises(ConfigError, match="prefetch_capacity"):
        HotCacheConfig(capacity=1, prefetch_capacity=-1)


def test_prefetch_then_search_exact_and_served(random_engine, random_vectors):
    cache = HotClusterCache(random_engine, HotCacheConfig(capacity=0, prefetch_capacity=ALL, device="cpu"))
    engine = TieredEngine(random_engine, cache)
    rng = np.random.default_rng(12)
    queries = queries_from(rng, random_vectors, 12)
    for i, q in enumerate(queries):
        cache.prefetch(q, 400_000, owner=i)
    assert_identical(
        stepwise(engine, queries, 10, 16, 4, rng), reference(random_engine, queries, 10, 16)
    )
    assert cache.stats().served_fraction > 0.3
    cache.close()


def test_ties_exact_with_cache(tie_vectors, host):
    rng = np.random.default_rng(13)
    ids = rng.permutation(tie_vectors.shape[0]).astype(np.int64)
    base = FaissIVFEngine(make_ivf(tie_vectors, 16, "l2", ids=ids))
    cache = HotClusterCache(base, HotCacheConfig(capacity=8, swap_every=1, device="cpu"))
    engine = TieredEngine(base, cache)
    queries = np.concatenate([tie_vectors[::61][:16], queries_from(rng, tie_vectors, 8)])
    engine.search(queries, 5, 8)
    cache.wait_for_swap()
    assert cache.resident.tiles
    assert_identical(stepwise(engine, queries, 6, 8, 3, rng), reference(base, queries, 6, 8))
    cache.close()


def test_swaps_are_asynchronous_and_counted(random_engine, random_vectors):
    cache = HotClusterCache(random_engine, HotCacheConfig(capacity=4, swap_every=3, device="cpu"))
    engine = TieredEngine(random_engine, cache)
    q = random_vectors[:2]
    probe = engine.probe(q, 4)
    for _ in range(2):
        engine.search_step([SearchTask.of(q[0], probe[0])], 3)
    assert cache.stats().swaps == 0 and not cache.resident.tiles
    engine.search_step([SearchTask.of(q[0], probe[0])], 3)
    cache.wait_for_swap()
    assert cache.stats().swaps == 1
    assert cache.resident.hot == frozenset(probe[0].tolist())
    cache.close()


def test_one_big_step_swaps_by_probes_counted(random_engine, random_vectors):
    # A wavefront step batching many queries must warm the cache as many one-query steps would.
    cache = HotClusterCache(random_engine, HotCacheConfig(capacity=8, swap_every=10_000,
                                                          device="cpu"))
    engine = TieredEngine(random_engine, cache)
    rng = np.random.default_rng(12)
    few = queries_from(rng, random_vectors, 1)
    engine.search(few, 5, 8)  # 8 probes, fewer than nlist: nothing due yet
    cache.wait_for_swap()
    assert cache.stats().swaps == 0
    many = queries_from(rng, random_vectors, random_engine.nlist // 8)
    engine.search(many, 5, 8)  # nlist probes in one step
    cache.wait_for_swap()
    assert cache.stats().swaps == 1 and len(cache.resident.tiles) == 8
    cache.close()


def test_swap_probes_overrides_nlist(random_engine, random_vectors):
    cache = HotClusterCache(random_engine, HotCacheConfig(capacity=4, swap_every=10_000,
                                                          swap_probes=4, device="cpu"))
    engine = TieredEngine(random_engine, cache)
    q = random_vectors[:1]
    engine.search_step([SearchTask.of(q[0], engine.probe(q, 4)[0])], 3)
    cache.wait_for_swap()
    assert cache.stats().swaps == 1
    cache.close()


def test_config_and_index_errors(random_vectors):
    with pytest.raises(ConfigError, match="swap_every"):
        HotCacheConfig(capacity=1, swap_every=0)
    with pytest.raises(ConfigError, match="swap_probes"):
        HotCacheConfig(capacity=1, swap_probes=0)
    sq8 = FaissIVFEngine(make_ivf(random_vectors, 16, "l2", kind="sq8"))
    with pytest.raises(SearchIndexError, match="IVF-Flat"):
        HotClusterCache(sq8, HotCacheConfig(capacity=1, device="cpu"))


def test_tiles_are_float32_half_the_bytes(random_engine):
    cache = HotClusterCache(random_engine, HotCacheConfig(capacity=0, prefetch_capacity=ALL, device="cpu"))
    q = np.zeros(random_engine.dim, np.float32)
    report = cache.prefetch(q, 10**9, owner="all")
    sizes = random_engine.cluster_sizes()
    assert {t.vectors.dtype for t in cache.resident.tiles.values()} == {torch.float32}
    assert cache.resident.nbytes == int(sizes[list(report.fetched)].sum()) * random_engine.dim * 4
    cache.close()


@pytest.mark.parametrize("precision", ["highest", "high", "medium"])
@pytest.mark.parametrize("metric", ["l2", "ip"])
def test_near_ties_exact_on_float32_tiles(metric, precision):
    """Vectors a rounding error apart: the tier's float32 products misorder them, its bound
    (widened for TF32 and bf16 products) keeps every candidate, faiss re-scores."""
    from .test_listmajor import near_ties

    x, q = near_ties(metric)
    base = FaissIVFEngine(make_ivf(x, 8, metric))
    cache = HotClusterCache(base, HotCacheConfig(capacity=0, prefetch_capacity=ALL, device="cpu"))
    engine = TieredEngine(base, cache)
    cache.prefetch(q[0], x.nbytes, owner=0)
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(precision)
    try:
        rng = np.random.default_rng(14)
        got = stepwise(engine, q, 10, 4, 2, rng, scan=ScanOrder.CLUSTER)
    finally:
        torch.set_float32_matmul_precision(before)
    assert_identical(got, reference(base, q, 10, 4))
    assert cache.stats().served_fraction > 0
    cache.close()
