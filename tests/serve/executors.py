"""Executors a test puts behind the server in place of the real one (through
`ragraph.runtime.app.make_executor`, which the hub calls at every start): one that fails each
request as its question says, one whose run dies on its first request."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import ClassVar

import pytest

from ragraph.runtime import app as runtime_app
from ragraph.runtime.catalog import Catalog
from ragraph.runtime.outcome import Outcome, RunStats
from ragraph.runtime.request import Request


class Scripted:
    """Fails each request with the kind and message its question names: `"engine: it broke"`
    fails with kind "engine" and message "it broke" (the executor's `on_done`, as a real run
    reports a failure)."""

    name: ClassVar[str] = "scripted"

    async def run(self, catalog: Catalog, arrivals: AsyncIterator[Request],
                  on_done: Callable[[Outcome], None]) -> RunStats:
        async for request in arrivals:
            kind, _, message = request.question.partition(": ")
            now = time.perf_counter()
            on_done(Outcome(rid=request.id, question=request.question, answer=None,
                            error=message, path=(), passages=None, golden_answers=(),
                            admitted_at=now, finished_at=now, workflow=request.workflow,
                            error_kind=kind))  # type: ignore[arg-type]
        return RunStats()


class DiesOnFirstRequest:
    """A run with a bug outside every request's guard: it takes a request and raises."""

    name: ClassVar[str] = "dies"

    async def run(self, catalog: Catalog, arrivals: AsyncIterator[Request],
                  on_done: Callable[[Outcome], None]) -> RunStats:
        async for _ in arrivals:
            raise RuntimeError("injected: the scheduler's own bug")
        return RunStats()


@contextmanager
def executors(*first: object) -> Iterator[list[object]]:
    """The hub's next starts get `first` in turn, then the real executor; yields what each start
    got."""
    real, queue, made = runtime_app.make_executor, list(first), []

    def make(config, services, client=None):  # noqa: ANN001, ANN202 - make_executor's
        executor = queue.pop(0) if queue else real(config, services, client)
        made.append(executor)
        return executor

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runtime_app, "make_executor", make)
        yield made
