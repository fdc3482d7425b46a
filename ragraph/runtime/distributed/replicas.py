"""`ReplicaRouter`: one `LLMEngine` in front of several, with prefix-aware routing and failover.

A request that fails on a replica is retried on another only when that replica is down (it no
longer answers its health check): a request that fails on a live replica (a prompt over the
context, a server error of its own) fails as it would on one server. On failover the request
starts again on the new replica; the tokens its stream already delivered are checked against the
new replica's first tokens (greedy decoding makes them equal) and not delivered twice. Every
failover is logged for the run summary. A replica marked down is health-checked again with
exponential backoff (`RouterConfig.probe_after_s` doubling up to `probe_max_s`) and routed to
again once it answers.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ragraph.errors import ConfigError, EngineError
from ragraph.runtime.distributed.faults import Fault, FaultLog
from ragraph.runtime.distributed.routing import (
    PrefixTable,
    RouterConfig,
    choose,
    next_probe_s,
    prefix_hashes,
)
from ragraph.runtime.llm.base import EngineBase
from ragraph.runtime.llm.chat import prompt_text
from ragraph.runtime.llm.failure import cause
from ragraph.runtime.llm.http.openai import OpenAIHttpConfig, OpenAIHttpEngine
from ragraph.runtime.llm.protocol import (
    EngineCounters,
    GenerationRequest,
    GenerationResult,
    LLMEngine,
    TokenEvent,
)
from ragraph.runtime.llm.stream import GenerationStream

if TYPE_CHECKING:
    from ragraph.runtime.llm.settings import LlmConfig

log = logging.getLogger(__name__)
Sleep = Callable[[float], Awaitable[object]]


@runtime_checkable
class HealthChecked(Protocol):
    async def alive(self) -> bool: ...


class ReplicaRouter(EngineBase):
    """Several engines serving one model, seen by the scheduler as one engine."""

    def __init__(self, engines: Sequence[LLMEngine], config: RouterConfig | None = None,
                 sleep: Sleep = asyncio.sleep) -> None:
        """`sleep`: how the router waits between health checks of a down replica (a test
        passes one it controls)."""
        if not engines:
            raise ConfigError("replicas", "a router needs at least one engine")
        super().__init__(f"{len(engines)} x {engines[0].name}", engines[0].context_length)
        self.engines = list(engines)
        self.config = config or RouterConfig()
        self.simulated = bool(engines[0].simulated)  # type: ignore[misc]
        self.batch_invariant = all(e.batch_invariant for e in engines)
        self.schedules_batches = all(e.schedules_batches for e in engines)
        self._tables = [PrefixTable(self.config.table_blocks) for _ in engines]
        self._load = [0] * len(engines)
        self._down: set[int] = set()
        self._inner: dict[str, GenerationStream] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._log = FaultLog()
        self._sleep = sleep
        self._probes: dict[int, asyncio.Task[None]] = {}  # a health-check loop per down replica
        self.routed = [0] * len(engines)

    async def _open(self) -> None:
        await asyncio.gather(*(e.start() for e in self.engines))
        # Servers may state their context only once started: plan with the smallest known one.
        known = [e.context_length for e in self.engines if e.context_length > 0]
        self.context_length = min(known, default=self.context_length)

    async def _shut(self) -> None:
        tasks = [*self._tasks, *self._probes.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.gather(*(e.close() for e in self.engines))

    async def alive(self) -> bool:
        """Whether any replica answers its health check (the server's readiness). One that does
        not is marked down, as a failed request would mark it, and re-checked with backoff."""
        down = await asyncio.gather(*(self._is_down(i) for i in range(len(self.engines))))
        return not all(down)

    @property
    def down(self) -> frozenset[int]:
        """The replicas requests are not sent to (until they answer a health check again)."""
        return frozenset(self._down)

    def faults(self) -> tuple[Fault, ...]:
        return self._log.snapshot()

    def counters(self) -> EngineCounters:
        """The replicas' counters added up."""
        summed = functools.reduce(EngineCounters.plus, (e.counters() for e in self.engines),
                                  EngineCounters())
        return summed.snapshot(simulated=self.simulated)

    def tokenize(self, text: str) -> tuple[int, ...]:
        usable = [r for r in range(len(self.engines)) if r not in self._down] or [0]
        return self.engines[usable[0]].tokenize(text)

    def _submit(self, request: GenerationRequest, stream: GenerationStream) -> None:
        task = asyncio.get_running_loop().create_task(self._serve(request, stream))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _abort(self, rid: str) -> None:
        inner = self._inner.get(rid)
        if inner is not None:
            inner.abort()

    def _route(self, request: GenerationRequest, tried: set[int]) -> int | None:
        if request.messages is not None:
            prompt = prompt_text(request.messages)
        else:
            prompt = request.prompt if request.prompt is not None else " ".join(
                map(str, request.prompt_ids or ()))
        hashes = prefix_hashes(prompt, self.config.block_chars)
        usable = set(range(len(self.engines))) - tried - self._down
        replica = choose(hashes, self._tables, self._load, usable, self.config.min_match)
        if replica is not None:
            self._tables[replica].add(hashes)
            self.routed[replica] += 1
        return replica

    async def _serve(self, request: GenerationRequest, stream: GenerationStream) -> None:
        delivered: list[TokenEvent] = []
        tried: set[int] = set()
        try:
            while True:
                replica = self._route(request, tried)
                if replica is None:
                    self._fail(stream, f"{self.name}: every replica is down")
                    return
                result = await self._attempt(replica, request, stream, delivered)
                if (result.finish_reason != "error" or stream.abort_requested
                        or not await self._is_down(replica)):
                    self._end(stream, result)  # a live replica's error is the request's own
                    return
                tried.add(replica)
                self._log.record(Fault(f"replica {replica} ({self.engines[replica].name})",
                                       f"request {request.rid}", result.error or "failed",
                                       "marked down; request sent to another replica"))
        except Exception as err:  # this request's failure (a bug is logged); the others go on
            message, kind = cause(err, self.name)
            self._fail(stream, message, kind=kind)

    async def _attempt(self, replica: int, request: GenerationRequest,
                       stream: GenerationStream, delivered: list[TokenEvent]) -> GenerationResult:
        """One try on one replica: events past those already delivered are passed on."""
        inner = self.engines[replica].submit(request)
        self._inner[request.rid] = inner
        self._load[replica] += 1
        already, replayed = len(delivered), 0
        try:
            while (event := await inner.next_event()) is not None:  # a failure: in the result
                if replayed < already:
                    _check_replay(delivered[replayed], event, replica)
                    replayed += 1
                    continue
                delivered.append(event)
                stream.push(event)
        except BaseException:  # a replay that differs (the request fails), or the router closing
            inner.abort()
            raise
        finally:
            self._load[replica] -= 1
            self._inner.pop(request.rid, None)
        return await inner.result(raise_on_error=False)

    async def _is_down(self, replica: int) -> bool:
        down = not await self._answers(replica)
        if down and replica not in self._down:
            self._down.add(replica)
            log.warning("replica %d (%s) is down; checking it again in %.0f s", replica,
                        self.engines[replica].name, self.config.probe_after_s)
        if down and replica not in self._probes:
            self._probes[replica] = asyncio.get_running_loop().create_task(
                self._reprobe(replica))
        return down

    async def _answers(self, replica: int) -> bool:
        engine = self.engines[replica]
        # An engine without a health check is taken to be up: its errors are its requests'.
        if not isinstance(engine, HealthChecked):
            return True
        try:
            return await engine.alive()
        except Exception as err:  # a check that fails in an unexpected way: not answering
            log.warning("replica %d (%s): health check failed: %r", replica, engine.name, err)
            return False

    async def _reprobe(self, replica: int) -> None:
        """Health-check a down replica with backoff until it answers; then route to it again."""
        wait = self.config.probe_after_s
        try:
            while True:
                await self._sleep(wait)
                if await self._answers(replica):
                    self._down.discard(replica)
                    log.warning("replica %d (%s) answers again: back in rotation", replica,
                                self.engines[replica].name)
                    return
                wait = next_probe_s(wait, self.config)
        finally:
            self._probes.pop(replica, None)


def _check_replay(before: TokenEvent, again: TokenEvent, replica: int) -> None:
    if before.text != again.text:
        raise EngineError(f"replica {replica} continued differently after a failover "
                          f"({before.text!r} then {again.text!r}); not sampled greedily?")


def replicas_for(llm: LlmConfig) -> ReplicaRouter:
    """The router over the LLM part's `--replicas` servers (OpenAI-compatible, each its own
    URL)."""
    return ReplicaRouter([OpenAIHttpEngine(OpenAIHttpConfig.of(llm, url=url))
                          for url in llm.replicas])
