"""What every executor shares: the engines, request arrival, per-request error attribution."""

from __future__ import annotations

import time
import traceback
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import ClassVar, Protocol

from ragraph.errors import RagraphError, failure_kind
from ragraph.runtime.catalog import Catalog
from ragraph.runtime.events import RunHooks
from ragraph.runtime.llm.protocol import LLMEngine
from ragraph.runtime.outcome import Outcome, RunStats, outcome_of
from ragraph.runtime.request import Request, RequestState, failed_state, new_state
from ragraph.runtime.search_service import SearchService
from ragraph.runtime.trace import Tracer

OnDone = Callable[[Outcome], None]


@dataclass
class Services:
    """The shared engines. `search_threads` bounds concurrent search calls (the core split)."""

    llm: LLMEngine
    search: SearchService
    tracer: Tracer = field(default_factory=Tracer)
    search_threads: int = 1
    hooks: RunHooks = field(default_factory=RunHooks)  # a watcher of the run (the server)


class Executor(Protocol):
    name: ClassVar[str]

    async def run(
        self, catalog: Catalog, arrivals: AsyncIterator[Request], on_done: OnDone
    ) -> RunStats: ...


async def arrive_all(requests: Iterable[Request]) -> AsyncIterator[Request]:
    """Offline workload: every request is there at once."""
    for request in requests:
        yield request


def describe_failure(err: BaseException) -> str:
    """A request's error message: ragraph's own errors as they are, anything else with its type
    and the innermost frame so a bug is attributable without killing the other requests."""
    if isinstance(err, RagraphError):
        return str(err)
    frame = traceback.extract_tb(err.__traceback__)[-1:] if err.__traceback__ else []
    where = f" at {frame[0].filename}:{frame[0].lineno}" if frame else ""
    return f"internal error: {type(err).__name__}: {err}{where}"


def fail(state: RequestState, err: BaseException) -> None:
    """Mark a request failed with `err`: its message and whose fault it is."""
    state.error, state.error_kind = describe_failure(err), failure_kind(err)


def admit(catalog: Catalog, request: Request, arrived: float) -> RequestState:
    """A request's initial state, started now (an executor admits a request when it takes it
    to run: `arrived` to now is its wait for a slot); a request that cannot start is a failed
    state (never raises)."""
    graph = catalog.graphs[catalog.default]
    try:
        graph = catalog.graph_for(request)
        state = new_state(graph, request, arrived)
    except Exception as err:  # a bad request is its own outcome
        state = failed_state(request, graph, describe_failure(err), arrived, failure_kind(err))
    state.started_at = clock()
    return state


def finish(state: RequestState, on_done: OnDone, now: float, hooks: RunHooks) -> None:
    state.finished_at = now
    hooks.finished(state)
    on_done(outcome_of(state, state.graph.name, now))


def clock() -> float:
    return time.perf_counter()
