"""The wavefront embeds the queries of concurrent requests in batches, and a query that cannot be
embedded fails only its own request."""

from __future__ import annotations

import asyncio

import pytest

from ragraph.runtime.app import execute
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.executors.base import Services
from ragraph.runtime.llm.sim import SimEngine
from ragraph.runtime.request import Request
from ragraph.runtime.retrieval.locality import History
from ragraph.runtime.scheduler.retrieval_side import EMBED_BATCH
from ragraph.runtime.scheduler.search_worker import Prepared, Query, prepare
from ragraph.runtime.search_service import SearchService
from tests.runtime import fakes, workflows
from tests.runtime.test_semantics import FAST


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
    assert [type(o) for o in out] == [Prepared, Prepared, ValueError, Prepared, Prepared]
    assert embedder.batches[0] == 5  # one batch first; then each query alone to find the culprit
    alone = prepare(search, [queries[0]])[0]
    assert (alone.vector == out[0].vector).all() and alone.order == out[0].order


def run(search, requests, executor):
    async def go():
        config = RuntimeConfig(engine="sim", executor=executor, passes="-O2", concurrency=32)
        async with SimEngine(FAST) as engine:
            return await execute(workflows.irg(), requests, config,
                                 Services(llm=engine, search=search))
    return asyncio.run(go())


@pytest.mark.parametrize("executor", ["stage-batched", "ragraph"])
def test_concurrent_requests_share_embedding_batches_with_the_same_answers(executor):
    requests = [Request(id=f"q{i}", question=f"question number {i}") for i in range(32)]
    search, embedder = service()
    batched = run(search, requests, executor)
    assert max(embedder.batches) > 1
    assert len(embedder.batches) < 3 * len(requests)  # three retrievals each, fewer calls
    if executor == "ragraph":  # bounded batches, so the first queries reach the search early
        assert max(embedder.batches) <= EMBED_BATCH
    alone, _ = service()
    reference = run(alone, requests, "sequential")
    assert {o.rid: o.answer for o in batched.outcomes} == {o.rid: o.answer for o in reference.outcomes}


@pytest.mark.parametrize("executor", ["sequential", "stage-batched", "ragraph"])
def test_a_query_that_cannot_be_embedded_fails_only_its_request(executor):
    requests = [Request(id=f"q{i}", question=f"question {i}" + (" POISON" if i == 5 else ""))
                for i in range(16)]
    search, _ = service()
    result = run(search, requests, executor)
    failed = {o.rid: o.error for o in result.outcomes if o.error}
    assert list(failed) == ["q5"] and "cannot embed" in failed["q5"]
    assert len(result.outcomes) == 16
