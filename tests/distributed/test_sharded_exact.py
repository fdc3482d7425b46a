"""Sharded search on a 3-node Ray cluster equals the single-node stepwise engine and faiss's
`index.search`: ids and distances bit for bit, for any shard count, steps and ties."""

from __future__ import annotations

import numpy as np
import pytest

from ragraph.runtime.distributed import sharded
from ragraph.runtime.distributed.options import ScaleConfig
from ragraph.runtime.distributed.sharded import ShardedEngine
from ragraph.runtime.retrieval.ivf.engine import FaissIVFEngine
from ragraph.runtime.retrieval.ivf.shard_lists import write_shards
from ragraph.runtime.retrieval.protocol import SearchEngine
from tests.retrieval.helpers import make_ivf, queries_from
from tests.retrieval.test_stepwise import assert_identical, reference, stepwise

faiss = pytest.importorskip("faiss")
# Fractions of a CPU: up to 4 shards on the cluster's 3 CPUs, beside other actors.
CPUS = 0.25


def index_dir(tmp_path, index):
    tmp_path.mkdir(parents=True, exist_ok=True)
    faiss.write_index(index, str(tmp_path / "index.faiss"))
    return tmp_path


@pytest.fixture(scope="module")
def random_index(tmp_path_factory):
    vectors = np.random.default_rng(0).standard_normal((6000, 24)).astype(np.float32)
    return vectors, make_ivf(vectors, 64, "l2")


@pytest.mark.parametrize("shards,replicate", [(1, 0.0), (2, 0.0), (3, 0.2), (4, 0.5)])
def test_random_data_any_shard_count(ray_cluster, random_index, tmp_path, shards, replicate):
    vectors, index = random_index
    engine = ShardedEngine.open(index_dir(tmp_path, index),
                                ScaleConfig(shards=shards, replicate=replicate, shard_cpus=CPUS))
    try:
        assert isinstance(engine, SearchEngine)
        rng = np.random.default_rng(shards)
        queries = queries_from(rng, vectors, 30)
        single = FaissIVFEngine(index)
        for nprobe, steps in ((8, 1), (16, 3), (64, 5)):
            want = reference(single, queries, 10, nprobe)
            assert_identical(stepwise(engine, queries, 10, nprobe, steps, rng), want)
            assert_identical(stepwise(single, queries, 10, nprobe, steps, rng), want)
            assert_identical(engine.search(queries, 10, nprobe), want)
        ids = np.array([0, 17, 5999, 6000, -1])
        np.testing.assert_array_equal(engine.cluster_of(ids), single.cluster_of(ids))
    finally:
        engine.close()


@pytest.mark.parametrize("metric", ["l2", "ip"])
def test_exact_ties_break_like_faiss(ray_cluster, tie_vectors, tmp_path, metric, monkeypatch):
    """Every vector four times under shuffled ids: the tied ids faiss keeps depend on its scan
    order, which the sharded finish replays across shards."""
    replays = []
    replay = sharded.replay_heap
    monkeypatch.setattr(sharded, "replay_heap", lambda *a: replays.append(1) or replay(*a))
    rng = np.random.default_rng(2)
    ids = rng.permutation(tie_vectors.shape[0]).astype(np.int64)
    index = make_ivf(tie_vectors, 16, metric, ids=ids)
    engine = ShardedEngine.open(index_dir(tmp_path, index),
                                ScaleConfig(shards=3, replicate=0.2, shard_cpus=CPUS))
    try:
        queries = queries_from(rng, tie_vectors, 20)
        for nprobe in (4, 16):
            want = reference(FaissIVFEngine(index), queries, 6, nprobe)
            assert_identical(stepwise(engine, queries, 6, nprobe, 3, rng), want)
        assert replays, "ties were decided by the replay"
    finally:
        engine.close()


def test_prebuilt_shard_files_give_the_same_answers(ray_cluster, random_index, tmp_path):
    vectors, index = random_index
    directory = index_dir(tmp_path, index)
    write_shards(directory, 3, replicate=0.1)
    assert sorted(p.name for p in (directory / "shards-3").iterdir()) == [
        "plan.json", "shard-0.faiss", "shard-1.faiss", "shard-2.faiss"]
    engine = ShardedEngine.open(directory, ScaleConfig(shards=3, shard_cpus=CPUS))
    try:
        queries = queries_from(np.random.default_rng(9), vectors, 20)
        assert_identical(engine.search(queries, 5, 32), reference(FaissIVFEngine(index),
                                                                  queries, 5, 32))
    finally:
        engine.close()
