"""The wavefront embeds the queries of concurrent requests in batches that take turns with the
search steps on the search thread, and a query that cannot be embedded fails only its own
request."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from ragraph.api.load import compile_catalog
from ragraph.ir.graph import RAGraph
from ragraph.ir.nodes import END, START
from ragraph.runtime.app import execute
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.events import RunHooks
from ragraph.runtime.executors.base import Services
from ragraph.runtime.llm.sim.engine import SimEngine
from ragraph.runtime.outcome import RunStats
from ragraph.runtime.request import Request
from ragraph.runtime.retrieval.ivf.listmajor import MIN_SHARING
from ragraph.runtime.retrieval.ivf.locality import History
from ragraph.runtime.retrieval.protocol import ScanOrder
from ragraph.runtime.scheduler import policies
from ragraph.runtime.scheduler.backoff import SpeculationBackoff
from ragraph.runtime.scheduler.policies import (
    FEED_BATCH,
    RunningMean,
    loaded_budget_ms,
    retrieval_budget_ms,
)
from ragraph.runtime.scheduler.retrieval_side import EMBED_BATCH, MAX_EMBED_BATCH, RetrievalSide
from ragraph.runtime.scheduler.search_worker import PreparedQuery, Query, prepare
from ragraph.runtime.search_service import SearchService
from tests.runtime import fakes, workflows
from tests.runtime.test_semantics import FAST

NO_BACKOFF = SpeculationBackoff(RunStats(), RunHooks())  # these tests start no speculation

pytestmark = pytest.mark.usefixtures("host")


class CountingEmbedder(fakes.HashEmbedder):
    """Counts calls and batch sizes; refuses any text containing "POISON"."""

    def __init__(self) -> None:
        self.batches: list[int] = []

    def embed(self, texts, threads=None):
        self.batches.append(len(texts))
        if any("POISON" in t for t in texts):
            raise ValueError("cannot embed this text")
        return super().embed(texts)


def service() -> tuple[SearchService, CountingEmbedder]:
    base = fakes.random_search()
    embedder = CountingEmbedder()
    return SearchService(base.engine, embedder, base.store, nprobe=base.nprobe), embedder


def test_prepare_embeds_a_batch_at_once_and_attributes_a_failure():
    search, embedder = service()
    queries = [Query(f"query {i}" + (" POISON" if i == 2 else ""), None, "probe", History())
               for i in range(5)]
    out = prepare(search, queries)
    assert [type(o) for o in out] == [PreparedQuery, PreparedQuery, ValueError, PreparedQuery, PreparedQuery]
    assert embedder.batches[0] == 5  # one batch first; then each query alone to find the culprit
    alone = prepare(search, [queries[0]])[0]
    assert (alone.vector == out[0].vector).all() and alone.order == out[0].order


def run(search, requests, executor, release="step"):
    async def go():
        config = RuntimeConfig.of(engine="sim", executor=executor, passes="-O2", concurrency=32,
                                  release=release)
        async with SimEngine(FAST) as engine:
            return await execute(compile_catalog(workflows.irg(), config.scheduler.passes),
                                 requests, config,
                                 Services(llm=engine, search=search))
    return asyncio.run(go())


@pytest.mark.parametrize("executor", ["stage-batched", "ragraph"])
def test_concurrent_requests_share_embedding_batches_with_the_same_answers(executor):
    requests = [Request(id=f"q{i}", question=f"question number {i}") for i in range(32)]
    search, embedder = service()
    batched = run(search, requests, executor)
    assert max(embedder.batches) > 1
    assert len(embedder.batches) < 3 * len(requests)  # three retrievals each, fewer calls
    if executor == "ragraph":
        assert max(embedder.batches) <= MAX_EMBED_BATCH
    alone, _ = service()
    reference = run(alone, requests, "sequential")
    assert {o.rid: o.answer for o in batched.outcomes} == {o.rid: o.answer for o in reference.outcomes}


def test_released_per_retrieval_no_query_waits_for_a_batch_and_each_is_searched_whole():
    """`release = "retrieval"`: the queries waiting are embedded as soon as the search thread
    is free and each retrieval is searched in one step, so its prompt reaches the engine when
    it finishes (`policies.stream_prompts`); the answers stay."""
    requests = [Request(id=f"q{i}", question=f"question number {i}") for i in range(16)]
    search = Recording(service()[0])
    streamed = run(search, requests, "ragraph", release="retrieval")
    steps = [n for kind, n in search.log if kind == "step"]
    embedded = sum(n for kind, n in search.log if kind == "embed")
    assert sum(steps) == embedded == 3 * len(requests)  # IRG: three retrievals a request
    # The sixteen first queries at once: not the engine's first small batch (`feed_batch`).
    assert search.log[:2] == [("embed", 16), ("step", 16)]
    reference = run(service()[0], requests, "sequential")
    assert {o.rid: o.answer for o in streamed.outcomes} == \
        {o.rid: o.answer for o in reference.outcomes}


@pytest.mark.parametrize("executor", ["sequential", "stage-batched", "ragraph"])
def test_a_query_that_cannot_be_embedded_fails_only_its_request(executor):
    requests = [Request(id=f"q{i}", question=f"question {i}" + (" POISON" if i == 5 else ""))
                for i in range(16)]
    search, _ = service()
    result = run(search, requests, executor)
    failed = {o.rid: o.error for o in result.outcomes if o.error}
    assert list(failed) == ["q5"] and "cannot embed" in failed["q5"]
    assert len(result.outcomes) == 16


class Recording(SearchService):
    """Writes down, in order, what the search thread did: ("embed", n) and ("step", n)."""

    def __init__(self, base: SearchService) -> None:
        super().__init__(base.engine, base.embedder, base.store, nprobe=base.nprobe)
        self.log: list[tuple[str, int]] = []

    def embed_and_probe(self, texts, nprobes, threads=None):
        self.log.append(("embed", len(texts)))
        return super().embed_and_probe(texts, nprobes, threads)

    def step(self, tasks, k, order=ScanOrder.BALANCED):
        self.log.append(("step", len(tasks)))
        return super().step(tasks, k, order)


def test_a_step_carries_every_query_embedded_before_it():
    """Whole searches (-O0): each batch is followed by one step carrying exactly its queries (a
    step started while the batch was embedded would have carried none of them)."""
    log = all_at_once(search_only(), n=48)
    assert log[0][0] == "embed" and log[-1][0] == "step"
    assert all(step == sum(batches) for batches, step in steps_with_their_batches(log))
    assert sum(n for kind, n in log if kind == "embed") == 48


def steps_with_their_batches(log: list[tuple[str, int]]) -> list[tuple[list[int], int]]:
    """Each step of a search thread's log with the batches embedded since the step before it."""
    out, batches = [], []
    for kind, n in log:
        if kind == "embed":
            batches.append(n)
        else:
            out.append((batches, n))
            batches = []
    return out


def searching(rule=None, nlist: int = 64, nprobe: int = 16) -> SimpleNamespace:
    """Services whose search service has `nlist` lists, list-major by `rule` (None: never)."""
    search = SimpleNamespace(list_rule=rule, nlist=nlist, nprobe=nprobe)
    return SimpleNamespace(search=search, search_threads=1)


def test_a_batch_grows_while_it_embeds_within_one_retrievals_search_time():
    side = RetrievalSide(searching(), None, None, None, 0.3, None, lambda: False, NO_BACKOFF)
    try:
        assert side._batch_size() == EMBED_BATCH  # nothing measured yet
        side.t_r, side.embed_ms = RunningMean(value=40.0), RunningMean(value=11.0)
        assert side._batch_size() == EMBED_BATCH  # MiniLM on 2 cores: 3 fit
        side.embed_ms = RunningMean(value=1.0)
        assert side._batch_size() == 40
        side.embed_ms = RunningMean(value=0.05)  # a lookup
        assert side._batch_size() == MAX_EMBED_BATCH
    finally:
        side.close()


def test_a_batch_grows_to_what_makes_its_step_list_major():
    """Steps of 16 queries over 4,096 lists at nprobe 256 share no list: a batch then takes as
    many as make its step list-major, however fast it embeds."""
    import numpy as np

    from ragraph.runtime.retrieval.ivf.listmajor import ListMajorRule

    rule = ListMajorRule(np.full(4096, 10**6), 0, "torch")
    for nprobe, want in [(256, 40), (128, MAX_EMBED_BATCH), (1024, EMBED_BATCH)]:
        side = RetrievalSide(searching(rule, 4096, nprobe), None, None, None, 0.3, None,
                             lambda: False, NO_BACKOFF)
        try:
            assert side._batch_size() == want
            side.t_r, side.embed_ms = RunningMean(value=40.0), RunningMean(value=11.0)
            assert side._batch_size() == want  # MiniLM on 2 cores: 3 fit in t_R
        finally:
            side.close()
    assert policies.list_major_batch(MIN_SHARING["torch"], 4096, 256) == 40
    assert policies.list_major_batch(None, 4096, 256) == 0


def test_batches_and_steps_take_turns_under_a_stream_of_requests():
    search = Recording(fakes.random_search())
    requests = [Request(id=f"q{i}", question=f"question number {i}") for i in range(96)]
    result = run(search, requests, "ragraph")
    assert not any(o.error for o in result.outcomes)
    kinds = [kind for kind, _ in search.log]
    assert kinds[0] == "embed"
    # A batch, and at most one more joining the step, before each step: embedding cannot hold
    # the search back.
    assert all(1 <= len(b) <= 2 for b, _ in steps_with_their_batches(search.log) if b)
    assert sum(n for kind, n in search.log if kind == "embed") == 3 * len(requests)


@pytest.mark.parametrize("cheap", [True, False])
def test_waiting_queries_that_embed_cheaply_join_the_first_step(monkeypatch, cheap, host):
    """64 requests at once. Where embedding is cheap beside a step (a lookup or GPU embedder;
    the numbers are policies.join_before_step's, tested there), the queries left after the
    first batch has timed the embedder are embedded before the first step, which carries all
    64; otherwise the first step carries the first batch. The first batch is EMBED_BATCH, or
    the queries that make a step over the fake index's 64 lists at nprobe 16 list-major where
    that takes more: that depends on the host's faster product library (16 where torch's
    wins, 24 where numpy's does: 6 queries a list)."""
    monkeypatch.setattr(policies, "join_before_step", lambda *_args: cheap)
    batch = max(EMBED_BATCH, policies.list_major_batch(MIN_SHARING[host.product], 64, 16))
    assert batch == {"torch": 16, "numpy": 24}[host.product]
    first = [("embed", batch), ("embed", 64 - batch), ("step", 64)] if cheap else [
        ("embed", batch), ("step", batch)]
    assert all_at_once(search_only())[:len(first)] == first


@pytest.mark.parametrize("cheap", [True, False])
def test_an_engine_holding_nothing_is_fed_a_small_batch_in_a_step_of_its_own(monkeypatch,
                                                                             cheap):
    """64 requests at once whose searches start generations: the engine holds nothing, so the
    first batch is FEED_BATCH queries and their step goes without the queries waiting, however
    cheaply they embed (policies.feed_batch); the next batch doubles it (no generation has
    been timed yet). A first batch of 16 and the 48 that joined its step kept the engine
    waiting 350-430 ms on 2 cores."""
    monkeypatch.setattr(policies, "join_before_step", lambda *_args: cheap)
    fed = [("embed", FEED_BATCH), ("step", FEED_BATCH), ("embed", 2 * FEED_BATCH)]
    assert all_at_once(searches_then(generate=True))[:len(fed)] == fed


def all_at_once(graph: RAGraph, n: int = 64) -> list[tuple[str, int]]:
    """The search thread's log for `n` requests arriving at once, `n` in flight (-O0)."""
    search = Recording(fakes.random_search())
    requests = [Request(id=f"q{i}", question=f"question number {i}") for i in range(n)]

    async def go():
        config = RuntimeConfig.of(engine="sim", passes="-O0", concurrency=n)
        async with SimEngine(FAST) as engine:
            return await execute(compile_catalog(graph, config.scheduler.passes),
                                 requests, config, Services(llm=engine, search=search))

    assert not any(o.error for o in asyncio.run(go()).outcomes)
    return search.log


def searches_then(generate: bool) -> RAGraph:
    g = RAGraph("search-then-answer" if generate else "search-only")
    g.add_input("question")
    g.add_retrieval("search", topk=3, query="question", output="docs")
    g.add_edge(START, "search")
    if generate:
        g.add_generation("answer", prompt="{docs} {question}", output="answer", max_tokens=4)
        g.add_edge("search", "answer")
        g.add_edge("answer", END)
    else:
        g.add_edge("search", END)
    return g


def search_only() -> RAGraph:
    return searches_then(generate=False)


def steps_after_batches(graph: RAGraph) -> list[tuple[int, int]]:
    """(queries embedded since the step before, retrievals in the step), for 96 requests, 48 at
    a time."""
    # Big enough that a retrieval outlasts a sub-stage: 48 searches of 32 lists of ~600 vectors.
    search = Recording(fakes.random_search(n=40_000, nlist=64, nprobe=32))
    requests = [Request(id=f"q{i}", question=f"question number {i}") for i in range(96)]

    async def go():
        config = RuntimeConfig.of(engine="sim", passes="-O2", concurrency=48)
        async with SimEngine(FAST) as engine:
            return await execute(compile_catalog(graph, config.scheduler.passes),
                                 requests, config, Services(llm=engine, search=search))

    result = asyncio.run(go())
    assert not any(o.error for o in result.outcomes)
    return [(sum(b), step) for b, step in steps_with_their_batches(search.log) if b]


def test_searches_that_end_their_requests_go_whole_in_one_step():
    """With no generation to start early, every retrieval finishes in the first step that
    carries it (one list-major step shares every list)."""
    assert all(step == batch for batch, step in steps_after_batches(searches_then(False)))


def test_sub_stages_stay_where_a_generation_follows():
    side = RetrievalSide(SimpleNamespace(search_threads=1), None, None, None, 0.3, None, lambda: False, NO_BACKOFF)
    try:
        side.t_r, side.beta = RunningMean(value=40.0), RunningMean(value=1.0)

        def job(feeds: bool, warm: bool = False) -> SimpleNamespace:
            return SimpleNamespace(warm_only=warm, chain=SimpleNamespace(feeds_generation=feeds))

        side.jobs = {1: job(False), 2: job(True, warm=True)}  # a warm-up does not count
        assert side._budget_ms(100.0) == float("inf")
        side.jobs[3] = job(True)
        staged = loaded_budget_ms(retrieval_budget_ms(1.0, 40.0), 1.0, 100.0)
        assert side._budget_ms(100.0) == staged < 100.0
    finally:
        side.close()


def test_the_search_thread_scans_on_the_split_s_threads():
    """libgomp keeps faiss's thread count per thread: the search thread must set its own, or it
    scans on every core beside llama.cpp's threads whatever `search_threads` says."""
    import faiss

    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(3)  # the opening thread's count must not be what the worker uses
    try:
        for threads in (1, 2):
            services = searching()
            services.search_threads = threads
            side = RetrievalSide(services, None, None, None, 0.3, None, lambda: False, NO_BACKOFF)
            try:
                assert side.worker.submit(faiss.omp_get_max_threads).result() == threads
            finally:
                side.close()
    finally:
        faiss.omp_set_num_threads(before)


def test_queries_still_join_a_step_once_batches_are_capped_by_the_engines_drain(monkeypatch):
    """On an engine that batches on its own, a batch is capped to what the engine can wait out
    (`policies.feed_batch`'s drain); where waiting queries embed cheaply beside a step they
    still join it: the larger step shares its lists. Capping kept them out, and IRG at nprobe
    256 on the seeds' index fell from 1.2x the thread pool to 1.0x."""
    monkeypatch.setattr(policies, "join_before_step", lambda *_args: True)
    search = Recording(fakes.random_search())
    requests = [Request(id=f"q{i}", question=f"question number {i}") for i in range(128)]

    async def go():
        config = RuntimeConfig.of(engine="sim", passes="-O0", concurrency=64)
        async with SimEngine(FAST) as engine:
            result = await execute(compile_catalog(workflows.irg(), config.scheduler.passes),
                                   requests, config, Services(llm=engine, search=search))
            return result, engine.counters()

    result, counters = asyncio.run(go())
    assert not any(o.error for o in result.outcomes)
    assert counters.decode_steps > 0  # the drain was measured, so batches were capped by it
    steps = steps_with_their_batches(search.log)
    assert any(len(batches) == 2 for batches, _ in steps[4:])  # past the first batches
