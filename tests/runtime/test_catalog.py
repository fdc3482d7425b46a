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
