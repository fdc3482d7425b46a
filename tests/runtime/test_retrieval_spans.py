"""A retrieval's trace span says where its search latency went (`bench.measure.search_latency`
reads it): the seconds its query queued for the search thread, those of its embedding batch,
and those of the search steps that scanned its clusters, whole searches (-O0) or sub-stages
(split-stages) alike."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ragraph import dsl
from ragraph.api.load import compile_catalog
from ragraph.runtime.app import execute
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.executors.base import Services
from ragraph.runtime.llm.sim.costmodel import GpuCostModel
from ragraph.runtime.llm.sim.engine import SimConfig, SimEngine
from ragraph.runtime.request import Request
from ragraph.runtime.trace import Tracer
from tests.runtime import fakes

ONESHOT = Path(__file__).resolve().parents[2] / "workflows" / "oneshot.rag"
FAST = SimConfig(cost=GpuCostModel(weight_bytes=1e9, step_overhead_s=2e-4), mean_output_tokens=6)


def traced(passes: str, budget_ms: float | None) -> Tracer:
    tracer = Tracer()

    async def go():
        config = RuntimeConfig.of(engine="sim", passes=passes, concurrency=6, budget_ms=budget_ms)
        async with SimEngine(FAST) as engine:
            services = Services(llm=engine, search=fakes.random_search(), tracer=tracer)
            requests = [Request(id=f"q{i}", question=f"question {i}?") for i in range(8)]
            return await execute(compile_catalog(dsl.load(ONESHOT), config.scheduler.passes),
                                 requests, config, services)

    result = asyncio.run(go())
    assert all(o.error is None for o in result.outcomes)
    return tracer


@pytest.mark.parametrize("passes, budget_ms", [("-O0", None), ("split-stages", 0.05)])
def test_a_retrievals_span_holds_its_embedding_and_scanning_seconds(passes, budget_ms):
    spans = [s for s in traced(passes, budget_ms).spans() if s.name == "retrieve search"]
    assert len(spans) == 8  # one per request
    for span in spans:
        queue, embed, scan = span.args["queue_s"], span.args["embed_s"], span.args["scan_s"]
        assert queue >= 0 and embed > 0 and scan > 0  # embedded, then scanned in some step
        assert queue + embed + scan <= span.end - span.start + 1e-9  # parts of it, not more
