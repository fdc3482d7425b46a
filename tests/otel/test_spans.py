"""The spans of a run (runtime/telemetry), caught with the SDK's in-memory exporter, on the sim
engine and real faiss: one CHAIN span per request with its node spans under it, attributes
after OpenInference's and OpenTelemetry's GenAI conventions, concurrent requests kept apart, a
failed request's error on its span, and nothing recorded when spans are off."""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("opentelemetry.sdk.trace")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import StatusCode  # noqa: E402

from ragraph.api.load import compile_catalog
from ragraph.runtime.app import execute  # noqa: E402
from ragraph.runtime.config import RuntimeConfig  # noqa: E402
from ragraph.runtime.events import RunHooks  # noqa: E402
from ragraph.runtime.executors.base import Services  # noqa: E402
from ragraph.runtime.llm.sim.engine import SimEngine  # noqa: E402
from ragraph.runtime.request import Request  # noqa: E402
from ragraph.runtime.telemetry.models import Models  # noqa: E402
from ragraph.runtime.telemetry.spans import SpanRecorder  # noqa: E402
from tests.runtime import fakes, workflows  # noqa: E402
from tests.runtime.test_semantics import FAST, questions  # noqa: E402

MODELS = Models(llm="sim-model", provider="sim", embedder="hash", simulated=True)


async def traced(graph, executor: str = "ragraph", passes: str = "-O2", n: int = 6,
                 requests: list[Request] | None = None, search=None):  # noqa: ANN001
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    recorder = SpanRecorder(provider.get_tracer("test"), MODELS)
    config = RuntimeConfig.of(engine="sim", executor=executor, passes=passes, concurrency=4)
    async with SimEngine(FAST) as engine:
        services = Services(llm=engine, search=search or fakes.random_search(),
                            hooks=RunHooks(recorder=recorder))
        result = await execute(compile_catalog(graph, config.scheduler.passes),
                               requests or questions(n), config, services)
    return result, exporter.get_finished_spans()


def roots(spans):
    return {s.attributes["ragraph.request.id"]: s for s in spans if s.parent is None}


def children(spans, parent):
    return sorted((s for s in spans if s.parent is not None
                   and s.parent.span_id == parent.context.span_id), key=lambda s: s.start_time)


@pytest.mark.parametrize("executor, passes", [("ragraph", "-O2"), ("ragraph", "-O0"),
                                              ("sequential", "-O0"), ("stage-batched", "-O0"),
                                              ("langgraph", "-O0")])
def test_one_chain_per_request_with_its_nodes(executor, passes):
    result, spans = asyncio.run(traced(workflows.hyde(), executor, passes))
    by_rid = roots(spans)
    assert set(by_rid) == {o.rid for o in result.outcomes}
    for outcome in result.outcomes:
        root = by_rid[outcome.rid]
        assert root.name == "workflow hyde"
        assert root.attributes["openinference.span.kind"] == "CHAIN"
        assert root.attributes["input.value"] == outcome.question
        assert root.attributes["output.value"] == outcome.answer
        assert root.status.status_code == StatusCode.UNSET
        nodes = children(spans, root)
        assert [(s.name, s.attributes["openinference.span.kind"]) for s in nodes] == [
            ("generate hypo", "LLM"), ("retrieve search", "RETRIEVER"),
            ("generate answer", "LLM")]
        # Every span of the request is in its trace and within its time.
        mine = [s for s in spans if s.context.trace_id == root.context.trace_id]
        assert all(root.start_time <= s.start_time <= s.end_time <= root.end_time for s in mine)
        assert {s.attributes["ragraph.request.id"] for s in mine} == {outcome.rid}


def test_retriever_and_llm_attributes():
    result, spans = asyncio.run(traced(workflows.hyde(), n=3))
    for outcome in result.outcomes:
        root = roots(spans)[outcome.rid]
        hypo, search, answer = children(spans, root)
        docs = outcome.passages
        assert search.attributes["input.value"] == hypo.attributes["output.value"].strip()
        assert search.attributes["gen_ai.operation.name"] == "retrieval"
        for i, passage in enumerate(docs):
            prefix = f"retrieval.documents.{i}.document"
            assert search.attributes[f"{prefix}.id"] == str(passage.id)
            assert search.attributes[f"{prefix}.content"] == passage.text
            assert search.attributes[f"{prefix}.score"] == pytest.approx(passage.score)
            assert json.loads(search.attributes[f"{prefix}.metadata"])["title"] == passage.title
        assert f"retrieval.documents.{len(docs)}.document.id" not in search.attributes
        assert search.attributes["ragraph.retrieval.nprobe"] == 16
        assert search.attributes["ragraph.retrieval.clusters_searched"] == 16
        assert search.attributes["ragraph.retrieval.steps"] >= 1
        assert answer.attributes["output.value"].strip() == outcome.answer
        assert outcome.question in answer.attributes["input.value"]
        a = answer.attributes
        assert a["gen_ai.operation.name"] == "text_completion"
        assert a["llm.model_name"] == a["gen_ai.request.model"] == "sim-model"
        assert a["llm.token_count.prompt"] == a["gen_ai.usage.input_tokens"] > 0
        assert a["llm.token_count.completion"] == a["gen_ai.usage.output_tokens"] > 0
        assert a["llm.token_count.total"] == a["llm.token_count.prompt"] + \
            a["llm.token_count.completion"]
        assert a["llm.token_count.prompt_details.cache_read"] == \
            a["gen_ai.usage.cache_read.input_tokens"] >= 0
        assert a["ragraph.llm.simulated"] is True
        launched, adopted = a["ragraph.speculation.launched"], a["ragraph.speculation.adopted"]
        assert a["ragraph.speculation.discarded"] == launched - adopted >= 0


def test_split_nodes_have_their_sub_stages():
    """-O2 splits retrieval and generation into units: each is a span under its node, the
    query's embedding an EMBEDDING span with the query text and the embedder."""
    result, spans = asyncio.run(traced(workflows.hyde(), n=2))
    root = roots(spans)[result.outcomes[0].rid]
    _, search, answer = children(spans, root)
    units = {s.attributes["ragraph.unit.kind"]: s for s in children(spans, search)}
    assert {"embed-query", "probe", "search-steps", "retrieve-commit"} <= set(units)
    embed = units["embed-query"]
    assert embed.attributes["openinference.span.kind"] == "EMBEDDING"
    assert embed.attributes["embedding.model_name"] == "hash"
    assert embed.attributes["embedding.embeddings.0.embedding.text"] == \
        search.attributes["input.value"]
    kinds = {s.attributes["ragraph.unit.kind"] for s in children(spans, answer)}
    assert {"prefill", "decode", "finish"} <= kinds
    assert all(search.start_time <= s.start_time <= s.end_time <= search.end_time
               for s in units.values())


def test_hot_cache_hits_are_counted_where_there_is_a_tier():
    from ragraph.runtime.retrieval.tier.hotcache import HotCacheConfig, HotClusterCache
    from ragraph.runtime.retrieval.tier.tiered import TieredEngine
    from ragraph.runtime.search_service import SearchService

    plain = fakes.random_search()
    tier = HotClusterCache(plain.engine, HotCacheConfig(capacity=16, swap_every=5))
    search = SearchService(TieredEngine(plain.engine, tier), plain.embedder, plain.store,
                           nprobe=plain.nprobe)
    try:
        _, spans = asyncio.run(traced(workflows.irg(), n=12, search=search))
    finally:
        tier.close()
    retrievals = [s.attributes for s in spans if s.name == "retrieve search"]
    assert all(0 <= a["ragraph.retrieval.hot_cache_hits"] <= a["ragraph.retrieval.clusters_searched"]
               for a in retrievals)
    assert sum(a["ragraph.retrieval.hot_cache_hits"] for a in retrievals) > 0
    _, spans = asyncio.run(traced(workflows.irg(), n=2))
    assert not any("ragraph.retrieval.hot_cache_hits" in s.attributes for s in spans)


def test_loop_rounds_are_spans_of_their_own():
    result, spans = asyncio.run(traced(workflows.irg(3), n=2))
    for outcome in result.outcomes:
        names = [s.name for s in children(spans, roots(spans)[outcome.rid])]
        assert names == ["retrieve search", "generate gen"] * 3
        assert list(roots(spans)[outcome.rid].attributes["ragraph.path"]) == list(outcome.path)


def test_concurrent_requests_keep_their_own_spans():
    """Requests interleave on one loop: each span's request id matches its trace's root, and
    a request's text never shows in another's spans."""
    result, spans = asyncio.run(traced(workflows.hyde(), n=8))
    by_trace = {s.context.trace_id: rid for rid, s in roots(spans).items()}
    assert len(by_trace) == len(result.outcomes) == 8
    for span in spans:
        assert span.attributes["ragraph.request.id"] == by_trace[span.context.trace_id]
    for outcome in result.outcomes:
        root = roots(spans)[outcome.rid]
        llm = [s for s in spans if s.context.trace_id == root.context.trace_id
               and s.name == "generate hypo"]
        assert len(llm) == 1 and outcome.question in llm[0].attributes["input.value"]


def test_a_failed_request_has_an_error_status():
    bad = Request(id="bad", question="q", inputs={"nonsense": "x"})
    result, spans = asyncio.run(traced(workflows.hyde(), requests=[*questions(2), bad]))
    failed = next(o for o in result.outcomes if o.rid == "bad")
    root = roots(spans)["bad"]
    assert root.status.status_code == StatusCode.ERROR
    assert root.status.description == failed.error
    assert root.attributes["error.type"] == failed.error_kind == "input"
    assert "output.value" not in root.attributes
    [event] = root.events
    assert event.name == "exception" and event.attributes["exception.message"] == failed.error
    ok = [r for rid, r in roots(spans).items() if rid != "bad"]
    assert all(r.status.status_code == StatusCode.UNSET for r in ok)


def test_nothing_is_built_without_a_recorder():
    """Spans off: a retrieval's report is never made (the hook is handed a callable)."""
    hooks = RunHooks()
    assert not hooks.recording

    def never():  # noqa: ANN202
        raise AssertionError("a retrieval's report was built with spans off")

    hooks.retrieved("r", "search", never)
