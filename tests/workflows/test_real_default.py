"""HyDE on the embedded default (Gemma-3-270M base model on llama.cpp, the Wikipedia index): the
few-shot prompts make the base model write its answer on the `Answer:` line, so the answer is
not empty (a bare `Answer:` cue made it start with a line break, which the stop string cut)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ragraph.dsl import load
from ragraph.errors import EngineError, SearchIndexError
from ragraph.runtime.app import execute, open_search, open_services
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.request import Request

pytestmark = pytest.mark.slow

HYDE = Path(__file__).resolve().parents[2] / "workflows" / "hyde.rag"


def test_hyde_answers_who_designed_the_eiffel_tower():
    pytest.importorskip("llama_cpp")
    pytest.importorskip("faiss")
    config = RuntimeConfig(engine="llamacpp", executor="sequential", passes="-O0", concurrency=1)
    try:
        search = open_search(config)
    except (SearchIndexError, ImportError) as err:
        pytest.skip(f"the default index cannot be loaded here: {err}")

    async def go():
        async with open_services(config, search) as services:
            return await execute(load(HYDE), [Request(id="q", question="Who designed the Eiffel "
                                                      "Tower?")], config, services)

    try:
        result = asyncio.run(go())
    except EngineError as err:
        if "model" not in str(err):
            raise
        pytest.skip(f"the default model cannot be loaded here: {err}")
    (outcome,) = result.outcomes
    assert outcome.error is None, outcome.error
    assert "eiffel" in outcome.answer.lower(), outcome.answer
    assert any("Eiffel" in p.title for p in outcome.passages)
