"""Optimizations never change answers: every executor and pass level gives the same outputs."""

from __future__ import annotations

import asyncio

import pytest

from ragraph.api.load import compile_catalog
from ragraph.runtime.app import execute
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.executors.base import Services
from ragraph.runtime.llm.sim.costmodel import GpuCostModel
from ragraph.runtime.llm.sim.engine import SimConfig, SimEngine
from ragraph.runtime.request import Request
from tests.runtime import fakes, workflows

# A fast simulated GPU (1 ms steps) keeps the suite quick; timing does not affect answers.
FAST = SimConfig(cost=GpuCostModel(weight_bytes=1e9, step_overhead_s=2e-4), mean_output_tokens=6)

VARIANTS = [
    ("sequential", "-O0"),
    ("stage-batched", "-O0"),
    ("ragraph", "-O0"),
    ("ragraph", "-O2"),
]


def questions(n: int) -> list[Request]:
    topics = ["Eiffel Tower", "photosynthesis", "Ada Lovelace", "the Nile", "jazz", "Mars"]
    return [Request(id=f"q{i}", question=f"What is notable about {topics[i % 6]} ({i})?")
            for i in range(n)]


async def run_all(graph, search, executor: str, passes: str, n: int):
    config = RuntimeConfig.of(engine="sim", executor=executor, passes=passes, concurrency=6,
                              budget_ms=0.05)
    engine = SimEngine(FAST)
    async with engine:
        services = Services(llm=engine, search=search)
        result = await execute(compile_catalog(graph, config.scheduler.passes),
                               questions(n), config, services)
    return result


@pytest.fixture(scope="module")
def search():
    return fakes.random_search()


@pytest.mark.parametrize("name", sorted(workflows.ALL))
def test_every_executor_gives_the_same_answers(name, search):
    graph = workflows.ALL[name]()
    answers = {}
    for executor, passes in VARIANTS:
        result = asyncio.run(run_all(graph, search, executor, passes, 20))
        assert len(result.outcomes) == 20
        assert all(o.error is None for o in result.outcomes), [o.error for o in result.outcomes]
        answers[(executor, passes)] = {o.rid: (o.answer, o.path) for o in result.outcomes}
    reference = answers[("sequential", "-O0")]
    for variant, got in answers.items():
        assert got == reference, f"{variant} differs from sequential -O0"


def test_hot_cluster_cache_and_prefetch_keep_answers(search):
    """The accelerator tier (torch on the CPU device here) serves part of the search work and
    changes no answer."""
    from ragraph.runtime.retrieval.tier.hotcache import HotCacheConfig, HotClusterCache
    from ragraph.runtime.retrieval.tier.tiered import TieredEngine
    from ragraph.runtime.search_service import SearchService

    base = search.engine
    tiered = TieredEngine(base, HotClusterCache(base, HotCacheConfig(capacity=16, swap_every=5)))
    cached = SearchService(tiered, search.embedder, search.store, nprobe=search.nprobe)
    graph = workflows.irg()
    plain = asyncio.run(run_all(graph, search, "ragraph", "-O2", 20))
    fast = asyncio.run(run_all(graph, cached, "ragraph", "-O2", 20))
    assert {o.rid: o.answer for o in fast.outcomes} == {o.rid: o.answer for o in plain.outcomes}
    assert fast.stats.vectors_on_accelerator > 0
    assert fast.stats.prefetch_errors == 0
    tiered.cache.close()


def test_speculation_happens_and_changes_no_answer(search):
    """With small search steps and an engine that has room, generations start on partial top-k
    results; each is adopted only when the final passages render the same prompt."""
    graph = workflows.irg()
    spec = asyncio.run(run_all(graph, search, "ragraph", "-O2", 20))
    plain = asyncio.run(run_all(graph, search, "sequential", "-O0", 20))
    assert spec.stats.speculations > 0
    assert spec.stats.speculation_hits + spec.stats.rollbacks <= spec.stats.speculations
    assert {o.rid: o.answer for o in spec.outcomes} == {o.rid: o.answer for o in plain.outcomes}
