"""The langgraph executor's node spans: its nodes run on LangGraph's worker threads and report
through the loop, so each request has the node spans the sequential baseline gives it, with
the work's own times and the retrieval's documents (sim engine, real faiss)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk.trace")
pytest.importorskip("langgraph")

from ragraph import dsl  # noqa: E402
from tests.otel.test_spans import children, roots, traced  # noqa: E402
from tests.runtime import workflows  # noqa: E402

WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"


def node_spans(spans):  # noqa: ANN001, ANN201
    """By request id: its node spans' (name, kind), in order."""
    return {rid: [(s.name, s.attributes["openinference.span.kind"]) for s in children(spans, r)]
            for rid, r in roots(spans).items()}


@pytest.mark.parametrize("graph", [workflows.hyde(), workflows.irg(2),
                                   dsl.load(WORKFLOWS / "ragfusion.rag")],
                         ids=["hyde", "irg", "ragfusion"])
def test_langgraph_gives_the_node_spans_of_the_sequential_baseline(graph):
    """A loop's rounds and a map (one span for its branches, then the merge) included."""
    _, sequential = asyncio.run(traced(graph, "sequential", "-O0", n=4))
    _, app = asyncio.run(traced(graph, "langgraph", "-O0", n=4))
    assert node_spans(app) == node_spans(sequential)


def test_langgraph_node_spans_have_the_works_times_and_documents():
    result, spans = asyncio.run(traced(workflows.hyde(), "langgraph", "-O0", n=4))
    for outcome in result.outcomes:
        hypo, search, answer = children(spans, roots(spans)[outcome.rid])
        # One after another, each its own length: the times of the nodes, not of the request.
        assert hypo.start_time < hypo.end_time <= search.start_time < search.end_time \
            <= answer.start_time < answer.end_time
        docs = outcome.passages
        assert [search.attributes[f"retrieval.documents.{i}.document.id"]
                for i in range(len(docs))] == [str(p.id) for p in docs]
        assert search.attributes["input.value"].strip()  # the hypothetical passage searched
        assert search.attributes["ragraph.retrieval.nprobe"] == 16
        assert answer.attributes["llm.model_name"] == "sim-model"
