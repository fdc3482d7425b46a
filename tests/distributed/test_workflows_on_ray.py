"""The nine workflows on a 3-node Ray cluster: the index's lists on shard actors, the simulated
engine; every answer and path equal to the single-node run's, also when a shard crashes
mid-run (it is restarted, its step re-sent, the retry reported)."""

from __future__ import annotations

import pytest

from ragraph.errors import ConfigError
from ragraph.runtime.distributed.options import ScaleConfig
from ragraph.runtime.distributed.sharded import ShardedEngine
from ragraph.runtime.llm.sim.engine import SimEngine
from ragraph.runtime.search_service import SearchService
from tests.distributed.crashing import crashing_shard
from tests.runtime import fakes
from tests.workflows.test_workflows import FAST, NAMES, load, run

faiss = pytest.importorskip("faiss")
QUESTIONS = [f"What is notable about topic {i}?" for i in range(12)]


@pytest.fixture(scope="module")
def single():
    return fakes.random_search()


def sharded_search(single: SearchService, directory, options: ScaleConfig,
                   server=None) -> SearchService:
    """The same index, embedder and passages as `single`, its lists on shard actors."""
    directory.mkdir(parents=True, exist_ok=True)
    faiss.write_index(single.engine.index, str(directory / "index.faiss"))
    extra = {} if server is None else {"server": server}
    engine = ShardedEngine.open(directory, options, **extra)
    return SearchService(engine, single.embedder, single.store, nprobe=single.nprobe)


@pytest.fixture(scope="module")
def on_ray(ray_cluster, single, tmp_path_factory):
    search = sharded_search(single, tmp_path_factory.mktemp("index"),
                            ScaleConfig(shards=3, shard_cpus=0.25))
    yield search
    search.engine.close()


@pytest.mark.parametrize("name", NAMES)
def test_the_nine_workflows_answer_as_on_one_node(name, single, on_ray):
    graph = load(name)
    want = run(graph, SimEngine(FAST), single, "sequential", "-O0", QUESTIONS)
    assert run(graph, SimEngine(FAST), on_ray, "ragraph", "-O2", QUESTIONS) == want
    assert run(graph, SimEngine(FAST), on_ray, "stage-batched", "-O0", QUESTIONS) == want
    assert not on_ray.engine.faults()


@pytest.mark.parametrize("replicate", [0.0, 0.5])
def test_a_shard_crashing_mid_run_loses_nothing(ray_cluster, single, tmp_path, replicate):
    """Shard 1 exits during its 4th search call; without replicas its lists wait for its
    restart, with them the other holder serves the replicated ones at once."""
    graph = load("irg")
    want = run(graph, SimEngine(FAST), single, "sequential", "-O0", QUESTIONS)
    server = crashing_shard(tmp_path / "crashed", shard=1, at_call=4)
    search = sharded_search(single, tmp_path / "index",
                            ScaleConfig(shards=3, replicate=replicate, shard_cpus=0.25),
                            server)
    try:
        pid = search.engine.pool.pids[1]
        assert run(graph, SimEngine(FAST), search, "ragraph", "-O2", QUESTIONS) == want
        faults = search.engine.faults()
        assert (tmp_path / "crashed").exists() and len(faults) == 1
        assert faults[0].who == "shard 1" and "re-sent" in faults[0].action
        assert (" 0 to a replica" in faults[0].action) == (replicate == 0)
        restarted = search.engine.pool.actors[1].ready.remote()
        import ray

        assert ray.get(restarted) != pid, "Ray restarted the shard in a new process"
    finally:
        search.engine.close()


@pytest.mark.parametrize("field,bad", [("shards", 0), ("replicate", 1.5), ("shard_cpus", 0.0),
                                       ("attempts", 0), ("restart_s", 0.0)])
def test_shard_options_name_the_bad_field(field, bad):
    with pytest.raises(ConfigError, match=field):
        ScaleConfig(**{field: bad})
