"""Baseline: the workflow as a real LangGraph app, served the way practitioners serve one.

`app.batch(inputs, config={"max_concurrency": c})` maps `app.invoke` over a pool of c worker
threads; this executor does exactly that, but hands each request to the pool as it arrives
(online runs) and reports each one as it finishes. The app calls the LLM through its own client
(`app_clients`): one llama-cpp-python `Llama` behind a lock for the embedded engine, the `openai`
client for an HTTP server, the in-process engine otherwise; and it searches faiss directly. The
executor opens that client when its run starts and closes it when the run ends (a caller that
measures the run without the model's load hands one in, opened: `client`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import ClassVar

from ragraph.errors import ConfigError
from ragraph.runtime.catalog import Catalog
from ragraph.runtime.executors.app_clients import AppLLM, AppRetriever, opened_app_llm
from ragraph.runtime.executors.base import OnDone, Services, admit, clock, fail, finish
from ragraph.runtime.executors.langgraph_app import (
    INTERNAL,
    PASSAGES,
    PATH,
    RECURSION_LIMIT,
    build_app,
    initial_state,
)
from ragraph.runtime.executors.langgraph_report import NodeReports
from ragraph.runtime.llm.settings import LlmConfig
from ragraph.runtime.outcome import RunStats
from ragraph.runtime.request import Request, RequestState


@dataclass
class LangGraphExecutor:
    name: ClassVar[str] = "langgraph"
    services: Services
    concurrency: int = 8
    llm: LlmConfig = field(default_factory=LlmConfig)  # the LLM part the app's client calls
    client: AppLLM | None = None  # opened by the caller, who closes it; None: the run opens one

    async def run(self, catalog: Catalog, arrivals: AsyncIterator[Request], on_done: OnDone) -> RunStats:
        async with self._client() as llm:
            retriever = AppRetriever(self.services.search)
            reports = NodeReports(self.services.hooks, self.services.tracer,
                                  asyncio.get_running_loop())
            apps: dict[str, object] = {}  # by workflow, built on first use (a long run's grows)

            def app_for(request: Request):
                # A catalog entry is never replaced, so its name keys its app for the whole run.
                name = catalog.name_of(request)
                if name not in apps:
                    apps[name] = build_app(catalog.workflows[name].source_program, llm,
                                           retriever, reports)
                return apps[name]
            with ThreadPoolExecutor(self.concurrency, thread_name_prefix="langgraph") as pool:
                tasks = []
                async for request in arrivals:
                    state = admit(catalog, request, clock())
                    tasks.append(asyncio.create_task(self._one(catalog, app_for, reports, state,
                                                               pool, on_done)))
                await asyncio.gather(*tasks)
        return RunStats()

    @asynccontextmanager
    async def _client(self) -> AsyncIterator[AppLLM]:
        """The app's LLM client: the one handed in, or one opened for this run (blocking: it
        may load a local model) and closed at its end."""
        if self.client is not None:
            yield self.client
            return
        async with opened_app_llm(self.llm, self.services.llm) as client:
            yield client

    async def _one(self, catalog: Catalog, app_for, reports: NodeReports, state: RequestState,
                   pool: ThreadPoolExecutor, on_done: OnDone) -> None:
        if state.error is None and not state.request.search.empty:
            fail(state, ConfigError("search", "the langgraph executor takes no per-request "
                                    "k, mode or filter (the ragraph, sequential and "
                                    "stage-batched executors do)"))
        if state.error is None:
            app = app_for(state.request)
            start = initial_state(catalog.workflow_for(state.request).source_program, state.rid,
                                  state.variables)
            config = {"recursion_limit": RECURSION_LIMIT}
            loop = asyncio.get_running_loop()
            reports.follow(state)
            try:
                final = await loop.run_in_executor(pool, partial(app.invoke, start, config))
                _settle(state, final)
            except Exception as err:  # attributed to this request; the others go on
                fail(state, err)
            finally:
                reports.forget(state)
        finish(state, on_done, clock(), self.services.hooks)


def _settle(state: RequestState, final: dict) -> None:
    """Copy the app's final state into the request's (what every executor reports)."""
    state.variables = {k: v for k, v in final.items() if k not in INTERNAL}
    state.path = list(final[PATH])
    state.node = state.path[-1]
    if final.get(PASSAGES) is not None:
        state.retrievals = [final[PASSAGES]]

