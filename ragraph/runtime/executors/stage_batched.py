"""Baseline: requests advance stage by stage in batches, as FlashRAG's pipelines do.

A batch is every request that has arrived (up to `batch_size`). Each round runs the generation
stage of every request waiting on a generation (the engine batches them), then the retrieval stage
of every request waiting on a retrieval as one batched search; retrieval and generation alternate
and never overlap.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import ClassVar

from ragraph.ir.nodes import END, Generate, Retrieve
from ragraph.ir.values import Passages
from ragraph.runtime import effects
from ragraph.runtime.catalog import Catalog
from ragraph.runtime.executors.base import (
    OnDone,
    Services,
    admit,
    advance,
    clock,
    describe_failure,
    finish,
)
from ragraph.runtime.executors.nodes import run_generation
from ragraph.runtime.outcome import RunStats
from ragraph.runtime.request import Request, RequestState
from ragraph.runtime.retrieval.protocol import SearchTask
from ragraph.runtime.search_service import attempt


@dataclass
class StageBatchedExecutor:
    name: ClassVar[str] = "stage-batched"
    services: Services
    batch_size: int = 8

    async def run(self, catalog: Catalog, arrivals: AsyncIterator[Request], on_done: OnDone) -> RunStats:
        queue: asyncio.Queue[tuple[Request, float] | None] = asyncio.Queue()
        feeder = asyncio.create_task(_feed(arrivals, queue))
        with ThreadPoolExecutor(1, thread_name_prefix="batch-search") as pool:
            while True:
                batch = await _next_batch(queue, self.batch_size)
                if not batch:
                    break
                await self._run_batch(catalog, batch, pool, on_done)
        await feeder
        return RunStats()

    async def _run_batch(self, catalog: Catalog, batch, pool, on_done: OnDone) -> None:
        active = [_started(catalog, r, t) for r, t in batch]
        while active:
            await self._stage(active, Generate, pool)
            await self._stage(active, Retrieve, pool)
            for state in [s for s in active if s.error or s.node == END]:
                active.remove(state)
                finish(state, on_done, clock())

    async def _stage(self, active: list[RequestState], kind, pool) -> None:
        ready = [s for s in active if not s.error and s.node != END
                 and isinstance(s.graph.node(s.node), kind)]
        if not ready:
            return
        if kind is Generate:
            results = await asyncio.gather(
                *(run_generation(s.graph.node(s.node), s, self.services) for s in ready),
                return_exceptions=True,
            )
        else:
            loop = asyncio.get_running_loop()
            results = await loop.run_in_executor(pool, search_batch, self.services, ready)
        for state, result in zip(ready, results, strict=True):
            try:
                if isinstance(result, BaseException):
                    raise result
                advance(state)
            except Exception as err:  # attributed to this request
                state.error = describe_failure(err)


def _started(catalog: Catalog, request: Request, arrived: float) -> RequestState:
    state = admit(catalog, request, arrived)
    if state.error is None:
        try:
            advance(state)
        except Exception as err:  # attributed to this request
            state.error = describe_failure(err)
    return state


def search_batch(services: Services, states: list[RequestState]) -> list:
    """One batched search for all waiting retrievals, as FlashRAG's `batch_search`: the queries
    embedded in one batch, each probed alone (see search_service), then searched together in one
    multi-threaded faiss call."""
    start = clock()
    search = services.search
    results: list = [attempt(_query_of, state) for state in states]
    queried = [i for i, q in enumerate(results) if isinstance(q, str)]
    nprobes = [states[i].graph.node(states[i].node).nprobe for i in queried]
    # The search stage has the search cores to itself: its embedding uses them all.
    probed = (search.embed_and_probe([results[i] for i in queried], nprobes,
                                     services.search_threads) if queried else [])
    tasks, owners = [], []
    for i, got in zip(queried, probed, strict=True):
        if isinstance(got, BaseException):  # this request's query failed; the batch goes on
            results[i] = got
        else:
            tasks.append(SearchTask.of(*got))
            owners.append(i)
    for k, group in _by_k(states, owners).items():
        step = search.step([tasks[j] for j in group], k)
        for j, partial in zip(group, step.partials, strict=True):
            i = owners[j]
            try:
                topk = search.finish(tasks[j].query, tasks[j].clusters, [partial], k)
                passages: Passages = search.passages(topk)
                node = states[i].graph.node(states[i].node)
                effects.apply_retrieval(node, states[i].variables, passages)
                states[i].retrievals.append(passages)
                services.hooks.unit_completed(states[i], node, start, clock())
                results[i] = passages
            except Exception as err:
                results[i] = err
    services.tracer.add_span("search", f"batch x{len(states)}", start, clock())
    return results


def _query_of(state: RequestState) -> str:
    return effects.retrieval_query(state.graph.node(state.node), state.variables)


def _by_k(states, owners) -> dict[int, list[int]]:
    groups: dict[int, list[int]] = {}
    for j, i in enumerate(owners):
        groups.setdefault(states[i].graph.node(states[i].node).topk, []).append(j)
    return groups


async def _feed(arrivals: AsyncIterator[Request], queue: asyncio.Queue) -> None:
    async for request in arrivals:
        await queue.put((request, clock()))
    await queue.put(None)


async def _next_batch(queue: asyncio.Queue, size: int) -> list[tuple[Request, float]]:
    """Wait for at least one request, then take whatever else has arrived (up to `size`)."""
    first = await queue.get()
    if first is None:
        return []
    batch = [first]
    while len(batch) < size and not queue.empty():
        item = queue.get_nowait()
        if item is None:
            queue.put_nowait(None)  # keep the end marker for the next call
            break
        batch.append(item)
    return batch
