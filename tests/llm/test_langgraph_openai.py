"""The LangGraph baseline against an OpenAI-compatible server, through the official `openai`
client (a real llama.cpp server on loopback)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ragraph import dsl
from ragraph.api.load import compile_catalog
from ragraph.runtime.app import app_client, execute, open_services
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.request import Request
from tests.runtime import fakes

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_langgraph_app_calls_an_http_server_with_the_openai_client(llama_server):
    pytest.importorskip("langgraph")
    pytest.importorskip("openai")
    graph = dsl.load(ROOT / "workflows" / "oneshot.rag")
    config = RuntimeConfig.of(engine="openai", url=llama_server, executor="langgraph",
                              concurrency=2)
    questions = ["Who designed the Eiffel Tower?", "What is the capital of Italy?"]

    async def main():
        async with open_services(config, fakes.random_search()) as services:
            async with app_client(config, services) as client:
                result = await execute(compile_catalog(graph, config.scheduler.passes),
                                       [Request(f"q{i}", q) for i, q in enumerate(questions)],
                                       config, services, client=client)
                return result, client.counters()

    result, used = asyncio.run(main())
    assert [o.error for o in result.outcomes] == [None, None]
    assert all(o.answer is not None and o.path == ("search", "answer", "END")
               for o in result.outcomes)
    assert used.requests == 2 and used.prompt_tokens > 0 and used.completion_tokens > 0
