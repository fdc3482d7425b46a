"""The replica router on simulated engines (no servers): prefix-aware then least-loaded routing,
and a replica that dies mid-run fails over with every answer unchanged."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from ragraph.errors import ConfigError, EngineError, PromptTooLong
from ragraph.ir import Sampling
from ragraph.runtime.distributed.replicas import ReplicaRouter
from ragraph.runtime.distributed.routing import PrefixTable, RouterConfig, choose, prefix_hashes
from ragraph.runtime.llm.protocol import GenerationRequest, LLMEngine
from ragraph.runtime.llm.sim.engine import SimEngine
from ragraph.runtime.llm.stream import GenerationStream
from tests.runtime import fakes
from tests.workflows.test_workflows import FAST, load, run


class Fuse:
    """Blows once: for the first replica to be sent its `at`-th request (whatever the routing,
    one of three replicas gets a third request among the first seven)."""

    def __init__(self, at: int) -> None:
        self.at, self.blown = at, False

    def blows(self, submitted: int) -> bool:
        if self.blown or submitted < self.at:
            return False
        self.blown = True
        return True


class DyingEngine:
    """A simulated replica that dies when `fuse` blows: that request and every one in flight
    fail as on a dropped connection, later ones at once, and the health check fails."""

    def __init__(self, fuse: Fuse | None = None) -> None:
        self.inner = SimEngine(FAST)
        self.fuse, self.submitted, self.dead = fuse, 0, False
        self._streams: list = []

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    async def alive(self) -> bool:
        return not self.dead

    def submit(self, request: GenerationRequest):
        stream = self.inner.submit(request)
        self.submitted += 1
        self._streams.append(stream)
        if self.dead or (self.fuse is not None and self.fuse.blows(self.submitted)):
            self.dead = True
            for s in self._streams:
                s.fail("ConnectError: connection refused")
        return stream


TWENTY = replace(FAST, output_lengths=(20,))  # every answer 20 tokens long


class DiesMidStream:
    """A simulated replica that relays three tokens of a request, then drops the connection
    and stays down."""

    def __init__(self) -> None:
        self.inner, self.dead = SimEngine(TWENTY), False

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    async def alive(self) -> bool:
        return not self.dead

    def submit(self, request: GenerationRequest) -> GenerationStream:
        inner = self.inner.submit(request)
        out = GenerationStream(request.rid, lambda _: inner.abort())
        asyncio.get_running_loop().create_task(self._relay(inner, out))
        return out

    async def _relay(self, inner: GenerationStream, out: GenerationStream) -> None:
        relayed = 0
        async for event in inner:
            out.push(event)
            relayed += 1
            if relayed == 3 or self.dead:
                self.dead = True
                break
        if self.dead:
            inner.abort()
            out.fail("RemoteProtocolError: peer closed connection")
        else:
            out.finish(await inner.result())


def test_a_failover_mid_stream_delivers_each_token_once():
    """Greedy decoding: the new replica repeats the tokens already delivered, which are checked
    and skipped, so the stream reads as one uninterrupted generation."""
    request = GenerationRequest("r", "The history of the city of Paris begins",
                                params=Sampling(max_tokens=24))

    async def tokens(engine) -> tuple[list[str], str]:
        async with engine:
            stream = engine.submit(request)
            events = [e.text async for e in stream]
            return events, (await stream.result()).text

    want = asyncio.run(tokens(SimEngine(TWENTY)))
    router = ReplicaRouter([DiesMidStream(), SimEngine(TWENTY)])
    got = asyncio.run(tokens(router))
    assert got == want and "".join(got[0]) == got[1]
    assert router.engines[0].dead and len(router.faults()) == 1


def test_a_failover_to_a_replica_that_continues_differently_fails_the_request():
    """A replica that does not repeat the tokens already delivered (another model, sampling) must
    not splice two generations into one answer."""
    request = GenerationRequest("r", "The history of the city of Paris begins",
                                params=Sampling(max_tokens=24))

    async def go() -> BaseException | None:
        other = SimEngine(replace(TWENTY, vocab_size=1000))  # other token ids: other words
        async with ReplicaRouter([DiesMidStream(), other]) as router:
            try:
                await router.submit(request).result()
            except EngineError as err:
                return err
        return None

    err = asyncio.run(go())
    assert err is not None and "continued differently" in str(err)


def test_a_prompt_too_long_stays_the_clients_mistake_through_the_router():
    async def go() -> BaseException | None:
        async with ReplicaRouter([SimEngine(replace(FAST, context_length=64))]) as router:
            try:
                await router.submit(GenerationRequest("r", "word " * 100)).result()
            except EngineError as err:
                return err
        return None

    err = asyncio.run(go())
    assert isinstance(err, PromptTooLong) and "64" in str(err)


def test_hashes_cover_whole_blocks_cumulatively():
    a = prefix_hashes("x" * 130 + "tail", 64)
    b = prefix_hashes("x" * 128 + "other", 64)
    assert len(a) == 2 and a == b
    assert prefix_hashes("y" * 64 + "x" * 64, 64)[1] != a[1]  # block 2 hashes blocks 1 and 2


def test_a_shared_prefix_stays_on_its_replica_and_the_rest_goes_to_the_least_loaded():
    tables = [PrefixTable(64) for _ in range(3)]
    shared = prefix_hashes("system and documents " * 20, 64)
    tables[2].add(shared)
    assert choose(shared, tables, [0, 0, 5], {0, 1, 2}, 0.5) == 2
    other = prefix_hashes("another prompt entirely " * 20, 64)
    assert choose(other, tables, [3, 1, 5], {0, 1, 2}, 0.5) == 1
    assert choose(shared, tables, [0, 0, 5], {0, 1}, 0.5) == 0  # its replica is down
    assert choose(shared, tables, [0, 0, 0], set(), 0.5) is None


def test_the_router_is_an_engine_and_checks_its_config():
    assert isinstance(ReplicaRouter([SimEngine(FAST)]), LLMEngine)
    with pytest.raises(ConfigError, match="replicas"):
        ReplicaRouter([])
    with pytest.raises(ConfigError, match="min_match"):
        RouterConfig(min_match=0)


def test_requests_sharing_a_prefix_land_on_one_replica():
    async def go():
        router = ReplicaRouter([SimEngine(FAST) for _ in range(3)])
        async with router:
            context = "You answer from these documents: " + "passage text " * 40
            streams = [router.submit(GenerationRequest(f"r{i}", f"{context} question {i}",
                                                       params=Sampling(max_tokens=8)))
                       for i in range(9)]
            streams += [router.submit(GenerationRequest(f"u{i}", f"unrelated {i} " * 30,
                                                        params=Sampling(max_tokens=8)))
                        for i in range(3)]
            await asyncio.gather(*(s.result() for s in streams))
        return router.routed

    routed = asyncio.run(go())
    assert max(routed) >= 9, f"the nine shared-prefix prompts shared a replica: {routed}"
    assert sum(routed) == 12


@pytest.mark.parametrize("name", ["oneshot", "irg", "flare"])
def test_a_replica_dying_mid_run_changes_no_answer(name):
    search = fakes.random_search()
    questions = [f"What is notable about topic {i}?" for i in range(12)]
    want = run(load(name), SimEngine(FAST), search, "ragraph", "-O2", questions)
    fuse = Fuse(at=3)
    router = ReplicaRouter([DyingEngine(fuse) for _ in range(3)])
    got = run(load(name), router, search, "ragraph", "-O2", questions)
    assert got == want
    dead = [r for r, e in enumerate(router.engines) if e.dead]
    assert len(dead) == 1
    assert router.faults() and all(f"replica {dead[0]}" in f.who for f in router.faults())
