"""Aborted requests give their connections back: an HTTP engine whose requests are aborted at
any moment (a client leaving, a speculation dropped) keeps no socket to its server beyond its
idle pool. A request cut inside httpcore's pool bookkeeping by `Task.cancel()` left its
connection checked out for good (encode/httpcore#1093): `ragraph serve --engine openai` then
grew a socket per unlucky abort until it ran out of descriptors. Real uvicorn on loopback."""

from __future__ import annotations

import asyncio
import random

from ragraph.ir import Sampling
from ragraph.runtime.llm.http.openai import OpenAIHttpConfig, OpenAIHttpEngine
from ragraph.runtime.llm.protocol import GenerationRequest
from tests.chaos.fds import fds
from tests.chaos.upstream import SimUpstream

IDLE_POOL = 32  # the engine's idle connections (llm/http/base.py)


async def abort_all(url: str, count: int, within_s: float) -> tuple[list[str], int]:
    """`count` requests, 64 in flight, each aborted at a random moment in its first `within_s`:
    how each ended, and the sockets still open once all have."""
    rng = random.Random(7)
    async with OpenAIHttpEngine(OpenAIHttpConfig(base_url=url)) as engine:
        gate = asyncio.Semaphore(64)

        async def one(i: int) -> str:
            async with gate:
                stream = engine.submit(GenerationRequest(f"r{i}", prompt=f"question {i} on things",
                                                         params=Sampling(max_tokens=16)))
                await asyncio.sleep(rng.random() * within_s)
                stream.abort()
                return (await stream.result()).finish_reason

        reasons = await asyncio.gather(*(one(i) for i in range(count)))
        await asyncio.sleep(0.2)
        port = int(url.rsplit(":", 1)[1])
        return list(reasons), fds(port, client_ends_only=True)[1]


def test_aborts_at_any_moment_leave_no_socket_behind():
    with SimUpstream() as upstream:
        reasons, open_sockets = asyncio.run(abort_all(upstream.url, 1000, 0.1))
    assert set(reasons) <= {"abort", "stop", "length"}, set(reasons)
    assert reasons.count("abort") > 500  # most were cut mid-request, where the leak was
    assert open_sockets <= IDLE_POOL, f"{open_sockets} sockets left open by 1,000 aborts"
