"""execute runs compiled workflows only: a graph is compiled once where the run is set up, and
what runs is its program (`CompiledWorkflow.program`), never a second compile inside the run."""

from __future__ import annotations

import asyncio

import pytest

from ragraph.errors import ConfigError
from ragraph.passes import compile
from ragraph.runtime.app import execute
from ragraph.runtime.catalog import Catalog
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.executors.base import Services
from ragraph.runtime.llm.sim.engine import SimEngine
from tests.runtime import fakes, workflows


def test_execute_refuses_a_graph_that_was_not_compiled():
    config = RuntimeConfig.of(engine="sim")

    async def go():
        async with SimEngine() as engine:
            return await execute(workflows.hyde(), [], config,
                                 Services(llm=engine, search=fakes.random_search()))

    with pytest.raises(ConfigError, match=r"compile it first"):
        asyncio.run(go())


def test_a_catalog_of_compiled_workflows_takes_them_as_they_are():
    compiled = compile(workflows.hyde(), "-O2")
    catalog = Catalog.of({"a": compiled})
    assert catalog.workflows["a"] is compiled and catalog.default == "a"
    with pytest.raises(ConfigError, match=r"workflows\.b.*compile it first"):
        Catalog.of({"a": compiled, "b": workflows.hyde()})


def test_the_runs_clock_starts_when_the_executor_takes_its_first_request(monkeypatch):
    """Whoever calls execute (`ragraph run`, the --ray bench) reads the requests' wall time, not
    the executor's own set-up before it takes them (a calibration, the LangGraph app's model)."""
    from ragraph.runtime import app as runtime_app
    from ragraph.runtime.request import Request

    real = runtime_app.make_executor

    def slow_to_start(config, services, client=None):  # noqa: ANN001, ANN202
        executor = real(config, services, client)
        run = executor.run

        async def after_set_up(catalog, arrivals, on_done):  # noqa: ANN001, ANN202
            await asyncio.sleep(0.5)  # the executor's set-up, before it takes a request
            return await run(catalog, arrivals, on_done)

        executor.run = after_set_up
        return executor

    monkeypatch.setattr(runtime_app, "make_executor", slow_to_start)
    config = RuntimeConfig.of(engine="sim")

    async def go():
        async with SimEngine() as engine:
            return await execute(compile(workflows.hyde(), "-O0"),
                                 [Request(id="q", question="Who wrote Middlemarch?")], config,
                                 Services(llm=engine, search=fakes.random_search()))

    result = asyncio.run(go())
    assert result.outcomes[0].error is None
    assert result.summary.wall_s < result.outcomes[0].latency + 0.25  # the set-up is not in it
