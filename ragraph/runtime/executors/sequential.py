"""Baseline: each request runs its stages one after another; requests overlap only through a pool
of workers, as a LangChain/LangGraph application serving concurrent users does."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import ClassVar

from ragraph.runtime.catalog import Catalog
from ragraph.runtime.executors.base import OnDone, Services, admit, clock, fail, finish
from ragraph.runtime.executors.nodes import Baseline
from ragraph.runtime.outcome import RunStats
from ragraph.runtime.request import Request


@dataclass
class SequentialExecutor:
    name: ClassVar[str] = "sequential"
    services: Services
    concurrency: int = 8

    async def run(self, catalog: Catalog, arrivals: AsyncIterator[Request], on_done: OnDone) -> RunStats:
        slots = asyncio.Semaphore(self.concurrency)
        with ThreadPoolExecutor(self.concurrency, thread_name_prefix="seq-search") as pool:
            tasks = []
            async for request in arrivals:
                tasks.append(asyncio.create_task(self._one(catalog, request, slots, pool, on_done)))
            await asyncio.gather(*tasks)
        return RunStats()

    async def _one(self, catalog: Catalog, request: Request, slots, pool, on_done: OnDone) -> None:
        state = admit(catalog, request, clock())
        if state.error is None:
            async with slots:
                program = catalog.workflow_for(request).source_program
                try:
                    await Baseline(program, self.services, pool).run(state)
                except Exception as err:  # attributed to this request; the others go on
                    fail(state, err)
        finish(state, on_done, clock(), self.services.hooks)
