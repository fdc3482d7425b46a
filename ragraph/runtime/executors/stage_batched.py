"""Baseline: requests advance stage by stage in batches, as FlashRAG's pipelines do.

A batch is every request that has arrived (up to `batch_size`). Each round runs the generation
stage of every request waiting on a generation (the engine batches them), then the retrieval stage
of every request waiting on a retrieval as one batched search; retrieval and generation alternate
and never overlap. A map's branches join their stage's batch (every branch of every request in
one engine batch or one search); merges take no engine and run as soon as they are reached.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import ClassVar

from ragraph.ir.nodes import END, Generate, Merge, Retrieve
from ragraph.ir.values import Passages
from ragraph.runtime import effects
from ragraph.runtime.catalog import Catalog
from ragraph.runtime.executors.base import (
    OnDone,
    Services,
    admit,
    advance,
    clock,
    fail,
    finish,
)
from ragraph.runtime.executors.nodes import (
    all_at_once,
    run_generation,
    run_merge,
    whole_search,
)
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
            _merges(active, self.services)
            await self._stage(active, Generate, pool)
            _merges(active, self.services)
            await self._stage(active, Retrieve, pool)
            _merges(active, self.services)
            for state in [s for s in active if s.error or s.node == END]:
                active.remove(state)
                finish(state, on_done, clock(), self.services.hooks)

    async def _stage(self, active: list[RequestState], kind, pool) -> None:
        ready = [s for s in active if not s.error and s.node != END
                 and isinstance(s.graph.node(s.node), kind)]
        if not ready:
            return
        if kind is Generate:
            results = await asyncio.gather(
                *(run_generation(s.graph.node(s.node), s, self.services, all_at_once)
                  for s in ready),
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
                fail(state, err)


def _started(catalog: Catalog, request: Request, arrived: float) -> RequestState:
    state = admit(catalog, request, arrived)
    if state.error is None:
        try:
            advance(state)
        except Exception as err:  # attributed to this request
            fail(state, err)
    return state


def _merges(active: list[RequestState], services: Services) -> None:
    """Run every merge the requests have reached (no engine work: they complete at once)."""
    for state in active:
        try:
            while not state.error and isinstance(node := state.graph.node(state.node), Merge):
                run_merge(node, state, services)
                advance(state)
        except Exception as err:  # attributed to this request
            fail(state, err)


def search_batch(services: Services, states: list[RequestState]) -> list:
    """One batched search for all waiting retrievals (every branch of a map among them), as
    FlashRAG's `batch_search`: the queries embedded in one batch, each probed alone (see
    search_service), then searched together in one multi-threaded faiss call."""
    start = clock()
    results: list = [attempt(_queries_of, state) for state in states]
    asks = [(i, q) for i, qs in enumerate(results) if isinstance(qs, list) for q in qs]
    found = _search_all(services, [q for _, q in asks], [_node(states[i]) for i, _ in asks])
    for i, state in enumerate(states):
        if isinstance(results[i], BaseException):
            continue
        got = [f for (j, _), f in zip(asks, found, strict=True) if j == i]
        error = next((g for g in got if isinstance(g, BaseException)), None)
        results[i] = error or attempt(_apply, services, state, got, start)
    services.tracer.add_span("search", f"batch x{len(asks)}", start, clock())
    return results


def _apply(services: Services, state: RequestState, found: list[Passages],
           start: float) -> Passages:
    node = _node(state)
    if node.each:
        effects.apply_branches_to(node.output, state.variables, found)
    else:
        services.hooks.retrieved(state.rid, node.id, lambda: whole_search(
            services, node, effects.retrieval_query(node, state.variables), found[0]))
        effects.apply_retrieval(node, state.variables, found[0])
    state.retrievals.extend(effects.retrieved(state.variables[node.output]))
    services.hooks.unit_completed(state, node, start, clock())
    return found[-1] if found else Passages()


def _search_all(services: Services, queries: list[str], nodes: list[Retrieve]) -> list:
    """Passages (or the error) for each query, searched as one batch per top-k."""
    search = services.search
    out: list = [None] * len(queries)
    # The search stage has the search cores to itself: its embedding uses them all.
    probed = (search.embed_and_probe(queries, [n.nprobe for n in nodes], services.search_threads)
              if queries else [])
    tasks, owners = [], []
    for i, got in enumerate(probed):
        if isinstance(got, BaseException):  # this query failed; the batch goes on
            out[i] = got
        else:
            tasks.append(SearchTask.of(*got))
            owners.append(i)
    for k, group in _by_k(nodes, owners).items():
        step = search.step([tasks[j] for j in group], k)
        for j, partial in zip(group, step.partials, strict=True):
            out[owners[j]] = attempt(_passages, search, tasks[j], partial, k)
    return out


def _passages(search, task: SearchTask, partial, k: int) -> Passages:  # noqa: ANN001
    return search.passages(search.finish(task.query, task.clusters, [partial], k))


def _node(state: RequestState) -> Retrieve:
    return state.graph.node(state.node)  # type: ignore[return-value]  # at its retrieval stage


def _queries_of(state: RequestState) -> list[str]:
    node = _node(state)
    if not node.each:
        return [effects.retrieval_query(node, state.variables)]
    return [effects.retrieval_query(node, v)
            for v in effects.branches(node.each, state.variables, node.id)]


def _by_k(nodes: list[Retrieve], owners: list[int]) -> dict[int, list[int]]:
    groups: dict[int, list[int]] = {}
    for j, i in enumerate(owners):
        groups.setdefault(nodes[i].topk, []).append(j)
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
