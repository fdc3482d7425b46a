"""The scheduler's one inbox: everything the engines and the arrival feed report, as typed
events in one queue the scheduler loop drains (mini-sglang's message style). Nothing on the
engines' side reaches into the scheduler's state; the loop applies each event in its own turn."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ragraph.runtime.llm.protocol import GenerationResult, TokenEvent
from ragraph.runtime.request import Request
from ragraph.runtime.scheduler.search_worker import ScanResult


@dataclass(frozen=True)
class Arrived:
    request: Request
    at: float


@dataclass(frozen=True)
class ArrivalsDone:
    pass


@dataclass(frozen=True)
class Token:
    """A token of a generation (`key`: the generation side's job key)."""

    key: int
    event: TokenEvent


@dataclass(frozen=True)
class Generated:
    """A generation ended: its result, or the error that ended it."""

    key: int
    result: GenerationResult | None
    error: BaseException | None = None


@dataclass(frozen=True)
class PrepareDone:
    """A batch of new retrievals was embedded and probed (the future carries the outcomes)."""

    keys: tuple[int, ...]
    future: asyncio.Future


@dataclass(frozen=True)
class StepDone:
    """A search cycle ended (the future carries its results)."""

    future: asyncio.Future


@dataclass(frozen=True)
class Retrieved:
    """Retrievals the running search cycle finished before its end (`search_worker.Release`)."""

    results: tuple[ScanResult, ...]


@dataclass(frozen=True)
class PrefetchDone:
    future: asyncio.Future


Event = (Arrived | ArrivalsDone | Token | Generated | PrepareDone | StepDone | Retrieved
         | PrefetchDone)


class Inbox:
    """A FIFO of events with one waiter (the scheduler loop). `put` is for the loop thread only;
    work done on other threads reports through futures, whose callbacks run on the loop thread
    (`done_callback`)."""

    def __init__(self) -> None:
        self._events: deque[Event] = deque()
        self._wake = asyncio.Event()

    def put(self, event: Event) -> None:
        self._events.append(event)
        self._wake.set()

    def done_callback(self, make):  # noqa: ANN001, ANN201 - future -> Event factory
        """A future callback that posts `make(future)`; futures complete on the loop thread."""
        return lambda future: self.put(make(future))

    def poster(self) -> Callable[[Event], None]:
        """A `put` for another thread (the search thread, mid-cycle): each event is put on the
        loop thread, in order with the futures' callbacks. Made on the loop thread."""
        loop = asyncio.get_running_loop()
        return lambda event: loop.call_soon_threadsafe(self.put, event)

    async def wait(self) -> None:
        if not self._events:
            await self._wake.wait()
        self._wake.clear()

    def drain(self) -> Iterator[Event]:
        while self._events:
            yield self._events.popleft()

    def __len__(self) -> int:
        return len(self._events)
