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
from dataclasses import dataclass
from typing import ClassVar

from ragraph.ir.nodes import END, Generate, Merge, Node, Retrieve
from ragraph.ir.values import Passages
from ragraph.program.program import Program, RetrievalChain
from ragraph.runtime.catalog import Catalog
from ragraph.runtime.executors.base import OnDone, Services, admit, clock, fail, finish
from ragraph.runtime.executors.nodes import Baseline, all_at_once
from ragraph.runtime.outcome import RunStats
from ragraph.runtime.request import Request, RequestState
from ragraph.runtime.retrieval.options import SearchSpec
from ragraph.runtime.retrieval.protocol import SearchTask
from ragraph.runtime.search_service import attempt
from ragraph.runtime.threads import search_pool


class _Batched(Baseline):
    """The baseline interpreter whose searches were made beforehand, in one batch for every
    request of the stage (`found`: by request, a result or its error per query)."""

    def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003 -- Baseline's
        super().__init__(*args, **kwargs)
        self.found: list[Passages | BaseException] = []
        self.batch_start: float | None = None

    def unit_start(self, req: RequestState) -> float:
        start, self.batch_start = self.batch_start, None
        return clock() if start is None else start

    async def search(self, chain: RetrievalChain, req: RequestState, query: str,
                     branch: int | None) -> Passages:
        got = self.found.pop(0)
        if isinstance(got, BaseException):
            raise got
        return got


_Active = tuple[RequestState, _Batched]


@dataclass
class StageBatchedExecutor:
    name: ClassVar[str] = "stage-batched"
    services: Services
    batch_size: int = 8

    async def run(self, catalog: Catalog, arrivals: AsyncIterator[Request], on_done: OnDone) -> RunStats:
        queue: asyncio.Queue[tuple[Request, float] | None] = asyncio.Queue()
        feeder = asyncio.create_task(_feed(arrivals, queue))
        with search_pool(self.services.search_threads, "batch-search") as pool:
            while True:
                batch = await _next_batch(queue, self.batch_size)
                if not batch:
                    break
                await self._run_batch(catalog, batch, pool, on_done)
        await feeder
        return RunStats()

    async def _run_batch(self, catalog: Catalog, batch, pool, on_done: OnDone) -> None:
        active: list[_Active] = []
        for request, arrived in batch:
            state = admit(catalog, request, arrived)
            if state.error is None:
                active.append(self._started(catalog.workflow_for(request).source_program, state))
            else:
                finish(state, on_done, clock(), self.services.hooks)
        while active:
            await _merges(active)
            await self._stage(active, Generate, pool)
            await _merges(active)
            await self._stage(active, Retrieve, pool)
            await _merges(active)
            for one in [a for a in active if a[0].error or a[0].node == END]:
                active.remove(one)
                finish(one[0], on_done, clock(), self.services.hooks)

    def _started(self, program: Program, state: RequestState) -> _Active:
        runner = _Batched(program, self.services, fan=all_at_once)
        try:
            runner.advance(state)
        except Exception as err:  # attributed to this request
            fail(state, err)
        return state, runner

    async def _stage(self, active: list[_Active], kind: type[Node], pool) -> None:
        ready = [(s, r) for s, r in active if not s.error and s.node != END
                 and isinstance(r.program.unit(s.node), kind)]
        if not ready:
            return
        if kind is Retrieve:
            loop = asyncio.get_running_loop()
            failed = await loop.run_in_executor(pool, search_batch, self.services, ready)
            ready = [(s, r) for (s, r), error in zip(ready, failed, strict=True)
                     if not _failed(s, error)]
        results = await asyncio.gather(*(r.run_unit(r.program.units[s.node], s)
                                         for s, r in ready), return_exceptions=True)
        for (state, runner), result in zip(ready, results, strict=True):
            try:
                if isinstance(result, BaseException):
                    raise result
                runner.advance(state)
            except Exception as err:  # attributed to this request
                fail(state, err)


def _failed(state: RequestState, error: BaseException | None) -> bool:
    if error is not None:
        fail(state, error)
    return error is not None


async def _merges(active: list[_Active]) -> None:
    """Run every merge the requests have reached (no engine work: they complete at once)."""
    for state, runner in active:
        try:
            while not state.error and isinstance(runner.program.unit(state.node), Merge):
                await runner.run_unit(runner.program.units[state.node], state)
                runner.advance(state)
        except Exception as err:  # attributed to this request
            fail(state, err)


def search_batch(services: Services, ready: list[_Active]) -> list[BaseException | None]:
    """One batched search for all waiting retrievals (every branch of a map among them), as
    FlashRAG's `batch_search`: the queries embedded in one batch, each probed alone (see
    search_service), then searched together in one multi-threaded faiss call. Each request's
    results wait in its runner (`_Batched.found`); returned: the error of a request whose
    queries could not be rendered, else None."""
    start = clock()
    chains = [r.program.retrievals[s.node] for s, r in ready]
    queries: list = [attempt(_queries_of, r, c, s) for (s, r), c in zip(ready, chains, strict=True)]
    asks = [(i, q) for i, qs in enumerate(queries) if isinstance(qs, list) for q in qs]
    specs = [s.request.search.spec(c.topk, c.mode, c.where)
             for (s, _), c in zip(ready, chains, strict=True)]
    found = _search_all(services, [q for _, q in asks], [chains[i] for i, _ in asks],
                        [specs[i] for i, _ in asks])
    for i, (_, runner) in enumerate(ready):
        runner.found = [f for (j, _), f in zip(asks, found, strict=True) if j == i]
        runner.batch_start = start
    services.tracer.add_span("search", f"batch x{len(asks)}", start, clock())
    return [q if isinstance(q, BaseException) else None for q in queries]


def _queries_of(runner: _Batched, chain: RetrievalChain, state: RequestState) -> list[str]:
    queries = runner.retrieval_queries(chain, state.variables)
    return [queries] if isinstance(queries, str) else queries


def _search_all(services: Services, queries: list[str], chains: list[RetrievalChain],
                specs: list[SearchSpec]) -> list:
    """Passages (or the error) for each query, searched as one batch per top-k (a filtered
    search in a call of its own: its selector is its own)."""
    search = services.search
    out: list = [None] * len(queries)
    # The search stage has the search cores to itself: its embedding uses them all.
    probed = (search.embed_and_probe(queries, [c.nprobe for c in chains], services.search_threads)
              if queries else [])
    tasks, owners = [], []
    for i, got in enumerate(probed):
        if isinstance(got, BaseException):  # this query failed; the batch goes on
            out[i] = got
        elif specs[i].where is not None:
            out[i] = attempt(_filtered, search, got, queries[i], specs[i])
        else:
            tasks.append(SearchTask.of(*got))
            owners.append(i)
    for k, group in _by_k(specs, owners).items():
        step = search.step([tasks[j] for j in group], k)
        for j, partial in zip(group, step.partials, strict=True):
            i = owners[j]
            out[i] = attempt(_passages, search, tasks[j], partial, queries[i], specs[i])
    return out


def _passages(search, task: SearchTask, partial, query: str,  # noqa: ANN001
              spec: SearchSpec) -> Passages:
    return search.ranked(search.finish(task.query, task.clusters, [partial], spec.k), query, spec)


def _filtered(search, probed, query: str, spec: SearchSpec) -> Passages:  # noqa: ANN001
    vector, probe = probed
    return search.ranked(search.filtered(vector, probe, spec), query, spec)


def _by_k(specs: list[SearchSpec], owners: list[int]) -> dict[int, list[int]]:
    groups: dict[int, list[int]] = {}
    for j, i in enumerate(owners):
        groups.setdefault(specs[i].k, []).append(j)
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
