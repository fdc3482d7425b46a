"""The Python API on the embedded llama.cpp engine and the default index (slow): the answers of
`rt.batch`, of threads calling `rt.run` and of `execute` (the scheduler directly) agree, in
llama.cpp's serial-exact mode, where batching cannot flip a greedy token."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

import ragraph
from ragraph.api.load import compile_catalog
from ragraph.runtime.app import execute, open_search, open_services
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.request import Request

pytestmark = pytest.mark.slow  # the Gemma GGUF and the default Wikipedia index
WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"
QUESTIONS = ["who designed the eiffel tower", "what is the capital of australia",
             "who painted the mona lisa"]


def test_batch_threads_and_execute_agree_on_llamacpp():
    config = RuntimeConfig.of(engine="llamacpp", exact=True, concurrency=4)
    wf = ragraph.load(WORKFLOWS / "hyde.rag")
    search = open_search(config)

    async def direct():
        async with open_services(config, search) as services:
            requests = [Request(id=str(i), question=q) for i, q in enumerate(QUESTIONS)]
            result = await execute(compile_catalog(wf, config.scheduler.passes),
                                   requests, config, services)
        return {o.question: o.answer for o in result.outcomes}

    expected = asyncio.run(direct())
    threaded: dict[str, str | None] = {}
    with ragraph.Runtime(config, search=search) as rt:
        batch = rt.batch(wf, QUESTIONS)
        workers = [threading.Thread(target=lambda q=q: threaded.update({q: rt.run(wf, q).answer}))
                   for q in QUESTIONS]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        streamed = list(rt.stream(wf, QUESTIONS[0]))
    assert {a.question: a.answer for a in batch} == expected == threaded
    assert all(a.answer and a.passages and a.usage.completion_tokens for a in batch)
    assert streamed[-1].answer.answer == expected[QUESTIONS[0]]
    assert any(isinstance(e, ragraph.Token) for e in streamed)
