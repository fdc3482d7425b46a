"""The workflows on the embedded default (Gemma-3-270M base model on llama.cpp, the Wikipedia
index): the few-shot prompts make the base model write its answer on the `Answer:` line, so the
answer is not empty (a bare `Answer:` cue made it start with a line break, which the stop string
cut); every one of the thirteen runs end to end under the wavefront scheduler at -O2."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ragraph.api.load import compile_catalog
from ragraph.dsl import load
from ragraph.errors import EngineError, SearchIndexError
from ragraph.runtime.app import execute, open_search, open_services
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.request import Request
from tests.real import missing, need_module
from tests.workflows.test_workflows import NAMES

pytestmark = pytest.mark.slow

WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"
HYDE = WORKFLOWS / "hyde.rag"


def run_default(graphs, requests, config: RuntimeConfig):
    need_module("llama_cpp")
    need_module("faiss")
    try:
        search = open_search(config)
    except (SearchIndexError, ImportError) as err:
        missing(f"the default index cannot be loaded here: {err}")

    async def go():
        async with open_services(config, search) as services:
            return await execute(compile_catalog(graphs, config.scheduler.passes),
                                 requests, config, services)

    try:
        return asyncio.run(go())
    except EngineError as err:
        if "model" not in str(err):
            raise
        missing(f"the default model cannot be loaded here: {err}")


def test_every_workflow_runs_end_to_end_on_the_embedded_default():
    graphs = {p.stem: load(p) for p in sorted(WORKFLOWS.glob("*.rag"))}
    assert tuple(graphs) == NAMES  # every shipped workflow, the chat form's included
    requests = [Request(id=name, question="Who designed the Eiffel Tower?", workflow=name)
                for name in graphs]
    config = RuntimeConfig.of(engine="llamacpp", executor="ragraph", passes="-O2",
                              concurrency=len(requests))
    result = run_default(graphs, requests, config)
    assert sorted(o.rid for o in result.outcomes) == sorted(graphs)
    for outcome in result.outcomes:
        assert outcome.error is None, (outcome.rid, outcome.error)
        assert outcome.answer.strip(), (outcome.rid, outcome.path)
        assert outcome.path[-1] == "END"


def test_hyde_answers_who_designed_the_eiffel_tower():
    config = RuntimeConfig.of(engine="llamacpp", executor="sequential", passes="-O0", concurrency=1)
    result = run_default(load(HYDE), [Request(id="q", question="Who designed the Eiffel Tower?")],
                         config)
    (outcome,) = result.outcomes
    assert outcome.error is None, outcome.error
    assert "eiffel" in outcome.answer.lower(), outcome.answer
    assert any("Eiffel" in p.title for p in outcome.passages)
