"""Many requests at once: none lost, memory bounded, every error attributed to its request, and
retrieval overlapping generation in the trace."""

from __future__ import annotations

import asyncio
import json
import random
import resource

import pytest

from ragraph.api.load import compile_catalog
from ragraph.runtime.app import execute
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.executors.base import Services
from ragraph.runtime.llm.sim.costmodel import GpuCostModel
from ragraph.runtime.llm.sim.engine import SimConfig, SimEngine
from ragraph.runtime.request import Request
from ragraph.runtime.trace import Tracer
from tests.runtime import fakes, workflows
from tests.runtime.refusing import RefusingEngine

FAST = SimConfig(cost=GpuCostModel(weight_bytes=1e8, step_overhead_s=5e-5), mean_output_tokens=4,
                 context_length=2048)


@pytest.fixture(scope="module")
def search():
    return fakes.random_search()


def mixed_requests(n: int, seed: int = 7) -> list[Request]:
    rng = random.Random(seed)
    names = sorted(workflows.ALL)
    out = []
    for i in range(n):
        out.append(Request(id=f"r{i}", question=f"question {i} about {rng.random():.3f}",
                           workflow=rng.choice(names)))
    # Requests that cannot succeed, each for its own reason.
    out[10] = Request(id="r10", question="q", workflow="no-such-workflow")
    out[20] = Request(id="r20", question="q", inputs={"colour": "blue"})
    out[30] = Request(id="r30", question="word " * 5000, workflow="hyde")  # over the context
    return out


async def _run(search, requests, executor="ragraph", tracer=None, cost=FAST, concurrency=64,
               refuse=None):
    config = RuntimeConfig.of(engine="sim", executor=executor, passes="-O2", concurrency=concurrency)
    async with RefusingEngine(SimEngine(cost), refuse=refuse) as engine:
        services = Services(llm=engine, search=search, tracer=tracer or Tracer())
        graphs = {name: make() for name, make in workflows.ALL.items()}
        return await execute(compile_catalog(graphs, config.scheduler.passes),
                             requests, config, services)


def test_a_thousand_mixed_requests_none_lost_errors_attributed(search):
    requests = mixed_requests(1000)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = asyncio.run(_run(search, requests))
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    by_id = {o.rid: o for o in result.outcomes}
    assert sorted(by_id) == sorted(r.id for r in requests)
    failed = {rid for rid, o in by_id.items() if o.error}
    assert failed == {"r10", "r20", "r30"}
    assert "unknown workflow 'no-such-workflow'" in by_id["r10"].error
    assert "inputs.colour" in by_id["r20"].error
    assert "context" in by_id["r30"].error.lower()
    assert all(o.answer is not None for rid, o in by_id.items() if rid not in failed)
    assert {o.workflow for o in result.outcomes} == set(workflows.ALL)
    # Requests are released when they finish: 64 are in flight at a time, so the peak grows by
    # a few MB, not by 1,000 requests' worth of prompts, passages and traces.
    assert grown_kib < 100 * 1024


@pytest.mark.parametrize("executor", ["sequential", "stage-batched", "ragraph"])
def test_an_engine_refusing_one_request_fails_that_request_only(search, executor):
    requests = [Request(id=f"q{i}", question=f"question {i}" + (" POISON" if i == 3 else ""),
                        workflow=name)
                for i, name in enumerate(sorted(workflows.ALL) * 2)]
    result = asyncio.run(_run(search, requests, executor=executor, refuse="POISON"))
    by_id = {o.rid: o for o in result.outcomes}
    assert sorted(by_id) == sorted(r.id for r in requests)
    assert {rid for rid, o in by_id.items() if o.error} == {"q3"}
    assert "refused" in by_id["q3"].error


def test_trace_shows_retrieval_overlapping_generation(search, tmp_path):
    tracer = Tracer()
    # A GPU-like step time (~2 ms) so generation lasts while searches run.
    cost = SimConfig(cost=GpuCostModel(weight_bytes=3e9), mean_output_tokens=8)
    requests = [Request(id=f"q{i}", question=f"irg question {i}", workflow="irg")
                for i in range(8)]
    result = asyncio.run(_run(search, requests, tracer=tracer, cost=cost, concurrency=8))
    assert all(o.error is None for o in result.outcomes)
    assert tracer.overlap_seconds("search", "llm") > 0
    path = tmp_path / "trace.json"
    tracer.write(path)
    events = json.loads(path.read_text())["traceEvents"]
    names = {e["args"]["name"] for e in events if e["ph"] == "M"}
    assert {"engines", "requests", "search", "llm"} <= names
    assert {f"q{i}" for i in range(8)} <= names
