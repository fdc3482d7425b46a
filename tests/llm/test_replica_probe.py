"""The replica router brings a replica back: one of two OpenAI-compatible fake servers on loopback
goes down (its port refuses connections), the router fails its request over and marks it down,
health-checks it with exponential backoff on a sleep the test steps, and routes to it again once
it listens on its port again."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from ragraph.errors import ConfigError
from ragraph.ir import Sampling
from ragraph.runtime.distributed.replicas import ReplicaRouter
from ragraph.runtime.distributed.routing import RouterConfig, next_probe_s
from ragraph.runtime.llm.http.openai import OpenAIHttpConfig, OpenAIHttpEngine
from ragraph.runtime.llm.protocol import GenerationRequest
from tests.llm.fakeserver import FakeServer, sse


class SteppedSleep:
    """The router's sleep: each call is recorded and returns when the test calls `tick`."""

    def __init__(self) -> None:
        self.asked: list[float] = []
        self._ticks: asyncio.Queue[None] = asyncio.Queue()
        self._changed = asyncio.Event()

    async def __call__(self, seconds: float) -> None:
        self.asked.append(seconds)
        self._changed.set()
        await self._ticks.get()

    async def asked_for(self, n: int) -> None:
        """Wait until the router has gone to sleep `n` times."""
        while len(self.asked) < n:
            self._changed.clear()
            await self._changed.wait()

    def tick(self) -> None:
        self._ticks.put_nowait(None)


async def until(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    """Wait for a state the router reaches after a health check over loopback."""
    async with asyncio.timeout(timeout_s):
        while not condition():
            await asyncio.sleep(0.01)


def server(name: str) -> FakeServer:
    """Answers completions with its name, and its health check (GET /v1/models) with 200."""
    return FakeServer(lambda r: (200, sse({"choices": [{"text": f" {name}",
                                                         "finish_reason": "stop"}]})))


async def two_at_once(router: ReplicaRouter, *prompts: str) -> list[str]:
    """Submitted together, so the second goes to the other replica (the least loaded)."""
    streams = [router.submit(GenerationRequest(p, p, params=Sampling(max_tokens=4))) for p in prompts]
    return [(await s.result()).text for s in streams]


def test_a_replica_that_went_down_is_probed_with_backoff_and_comes_back():
    async def go() -> None:
        a, b, sleep = server("a"), server("b"), SteppedSleep()
        async with a, b:
            engines = [OpenAIHttpEngine(OpenAIHttpConfig(base_url=s.url, name=f"replica {s.url}"))
                       for s in (a, b)]
            async with ReplicaRouter(engines, RouterConfig(probe_after_s=1.0, probe_max_s=3.0),
                                     sleep=sleep) as router:
                await b.stop()
                assert await two_at_once(router, "x", "y") == [" a", " a"]  # y failed over
                assert router.down == {1} and len(router.faults()) == 1
                for n in (1, 2):
                    await sleep.asked_for(n)
                    assert router.down == {1}
                    sleep.tick()  # b still refuses: the next wait is longer
                await sleep.asked_for(3)
                assert sleep.asked == [1.0, 2.0, 3.0]  # doubling, capped at probe_max_s
                await b.start()  # the same port again
                sleep.tick()
                await until(lambda: not router.down)
                assert await two_at_once(router, "z", "w") == [" a", " b"]
                assert router.routed == [3, 2] and len(sleep.asked) == 3

    asyncio.run(go())


def test_the_backoff_doubles_up_to_its_cap_and_is_validated():
    config = RouterConfig(probe_after_s=1.0, probe_max_s=60.0)
    waits = [1.0]
    for _ in range(8):
        waits.append(next_probe_s(waits[-1], config))
    assert waits == [1, 2, 4, 8, 16, 32, 60, 60, 60]
    with pytest.raises(ConfigError, match="probe_after_s"):
        RouterConfig(probe_after_s=5.0, probe_max_s=1.0)


def test_the_router_is_alive_while_any_replica_answers():
    # /readiness asks the engine's alive(): the router had none, so a server behind replicas
    # was "ready" with every replica down.
    async def go() -> None:
        a, b, sleep = server("a"), server("b"), SteppedSleep()
        async with a, b:
            engines = [OpenAIHttpEngine(OpenAIHttpConfig(base_url=s.url)) for s in (a, b)]
            async with ReplicaRouter(engines, sleep=sleep) as router:
                assert await router.alive() and not router.down
                await b.stop()
                assert await router.alive() and router.down == {1}  # routed around
                await a.stop()
                assert not await router.alive() and router.down == {0, 1}
                await a.start()
                sleep.tick()  # the first re-check of each replica
                sleep.tick()
                await until(lambda: 0 not in router.down)
                assert await router.alive()
                assert await two_at_once(router, "x") == [" a"]

    asyncio.run(go())
