"""The run observer and request cancel at the runtime boundary (runtime/events.py), on the
wavefront scheduler and the baselines: what a watcher sees adds up to what the run computed, and
a cancelled request ends, releases its generations and leaves the others' answers alone."""

from __future__ import annotations

import asyncio
from collections import defaultdict

import pytest

from ragraph.api.load import compile_catalog
from ragraph.runtime.app import execute
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.events import (
    GenerationUsage,
    RunHooks,
    SpeculationSettled,
    TextProduced,
    UnitCompleted,
)
from ragraph.runtime.executors.base import Services
from ragraph.runtime.llm.sim.engine import SimEngine
from ragraph.runtime.request import Request
from tests.runtime import fakes, workflows
from tests.runtime.test_semantics import FAST, questions


class Recorder:
    def __init__(self) -> None:
        self.events: list = []

    def emit(self, event) -> None:  # noqa: ANN001
        self.events.append(event)

    def of(self, kind: type, rid: str) -> list:
        return [e for e in self.events if isinstance(e, kind) and e.rid == rid]


async def observed(graph, executor: str, passes: str, n: int = 6):
    config = RuntimeConfig.of(engine="sim", executor=executor, passes=passes, concurrency=4)
    recorder = Recorder()
    async with SimEngine(FAST) as engine:
        services = Services(llm=engine, search=fakes.random_search(), hooks=RunHooks(recorder))
        result = await execute(compile_catalog(graph, config.scheduler.passes),
                               questions(n), config, services)
    return result, recorder


@pytest.mark.parametrize("executor, passes", [("ragraph", "-O2"), ("ragraph", "-O0"),
                                              ("sequential", "-O0")])
def test_observed_events_add_up_to_the_run(executor, passes):
    result, seen = asyncio.run(observed(workflows.hyde(), executor, passes))
    for outcome in result.outcomes:
        done = seen.of(UnitCompleted, outcome.rid)
        assigned = {k: v for e in done for k, v in e.outputs.items()}
        assert str(assigned["answer"]).strip() == outcome.answer
        assert assigned["docs"] == outcome.passages
        # Text of the answer generation as it came, and one usage report per generation.
        text = "".join(e.text for e in seen.of(TextProduced, outcome.rid) if e.origin == "answer")
        assert text.strip() == outcome.answer
        assert {u.origin for u in seen.of(GenerationUsage, outcome.rid)} == {"hypo", "answer"}
    settled = [e for e in seen.events if isinstance(e, SpeculationSettled)]
    assert all(e.origin in ("answer", "search") for e in settled)


def test_no_observer_no_cancel_by_default():
    hooks = RunHooks()
    assert hooks.cancel("r", "why") is False and not hooks.can_cancel


async def cancel_one(graph, victim: str):
    """Run requests that arrive as an async iterator; cancel `victim` once its first unit
    completed."""
    config = RuntimeConfig.of(engine="sim", concurrency=4, passes="-O2")
    hooks = RunHooks()
    started = asyncio.Event()

    class Watch(Recorder):
        def emit(self, event) -> None:  # noqa: ANN001
            super().emit(event)
            if isinstance(event, TextProduced) and event.rid == victim:
                started.set()

    hooks.observer = Watch()
    requests = questions(4)

    async def arrivals():
        for request in requests:
            yield request
        await started.wait()
        hooks.cancel(victim, "cancelled: the client disconnected")

    async with SimEngine(FAST) as engine:
        services = Services(llm=engine, search=fakes.random_search(), hooks=hooks)
        result = await execute(compile_catalog(graph, config.scheduler.passes),
                               arrivals(), config, services)
        in_flight = engine.in_flight
        aborted = engine.counters().aborted
    return result, in_flight, aborted


def test_cancel_ends_one_request_and_aborts_its_generation():
    graph = workflows.hyde()
    reference = asyncio.run(observed(graph, "ragraph", "-O2", 4))[0]
    result, in_flight, aborted = asyncio.run(cancel_one(graph, "q1"))
    by_id = {o.rid: o for o in result.outcomes}
    assert by_id["q1"].error == "cancelled: the client disconnected"
    assert in_flight == 0 and aborted >= 1
    for o in reference.outcomes:
        if o.rid != "q1":
            assert by_id[o.rid].answer == o.answer


def test_cancel_of_a_waiting_request_reports_it_once():
    async def run():
        config = RuntimeConfig.of(engine="sim", concurrency=1, passes="-O2")
        hooks, counts = RunHooks(), defaultdict(int)

        async def arrivals():
            yield Request(id="first", question="What is jazz?")
            yield Request(id="second", question="What is chess?")
            hooks.cancel("second", "cancelled: gone")  # queued behind "first", or running

        async with SimEngine(FAST) as engine:
            services = Services(llm=engine, search=fakes.random_search(), hooks=hooks)
            result = await execute(compile_catalog(workflows.irg(), config.scheduler.passes),
                                   arrivals(), config, services,
                                   on_done=lambda o: counts.__setitem__(o.rid, counts[o.rid] + 1))
        return result, counts

    result, counts = asyncio.run(run())
    by_id = {o.rid: o for o in result.outcomes}
    assert dict(counts) == {"first": 1, "second": 1}
    assert by_id["second"].error == "cancelled: gone" and by_id["first"].error is None
