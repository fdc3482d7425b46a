"""`GenerationStream`: the consumer's handle on one in-flight generation.

Engines feed a stream only from the asyncio loop thread (a thread-backed engine hops over with
`loop.call_soon_threadsafe`), so the stream needs no locks.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import replace

from ragraph.runtime.llm.failure import error_of
from ragraph.runtime.llm.protocol import ErrorKind, GenerationResult, TokenEvent


class GenerationStream:
    """Async iterator of `TokenEvent`s, in decode order, ending with a `GenerationResult`.

    Iterating raises the request's error if it failed (`failure.error_of`: `EngineError`,
    `PromptTooLong` or `EngineBug`); `abort()` asks the engine to stop the request at its next
    step (the result then has finish_reason "abort" and the tokens so far). An abort nobody
    asked for (the engine stopped the request on its own) is a failure of the engine, never a
    short answer.
    """

    def __init__(self, rid: str, on_abort: Callable[[str], None], engine: str = "engine") -> None:
        self.rid = rid
        self.engine = engine
        self._on_abort = on_abort
        self._events: deque[TokenEvent] = deque()
        self._wakeup = asyncio.Event()
        self._result: GenerationResult | None = None
        self._abort_requested = False

    # -- engine side (loop thread only) ----------------------------------------------------------

    def push(self, event: TokenEvent) -> None:
        if self._result is None:
            self._events.append(event)
            self._wakeup.set()

    def finish(self, result: GenerationResult) -> None:
        if self._result is None:
            if result.finish_reason == "abort" and not self._abort_requested:
                result = replace(result, finish_reason="error", error_kind="engine",
                                 error=f"{self.engine}: the engine stopped the generation on "
                                       "its own (finish_reason abort; nobody aborted it)")
            self._result = result
            self._wakeup.set()

    def fail(self, message: str, prompt_tokens: int = 0, kind: ErrorKind = "engine") -> None:
        """End the stream with an error that belongs to this request only."""
        self.finish(
            GenerationResult(
                rid=self.rid,
                text="",
                token_ids=(),
                finish_reason="error",
                prompt_tokens=prompt_tokens,
                cached_tokens=0,
                completion_tokens=0,
                error=message,
                error_kind=kind,
            )
        )

    # -- consumer side ---------------------------------------------------------------------------

    @property
    def done(self) -> bool:
        return self._result is not None

    @property
    def final(self) -> GenerationResult | None:
        """The result once the stream ended (a failed one too: nothing is raised)."""
        return self._result

    @property
    def abort_requested(self) -> bool:
        return self._abort_requested

    def abort(self) -> None:
        """Stop this request; other requests are not disturbed. Idempotent; no-op once done."""
        if self._result is None and not self._abort_requested:
            self._abort_requested = True
            self._on_abort(self.rid)

    def __aiter__(self) -> GenerationStream:
        return self

    async def __anext__(self) -> TokenEvent:
        event = await self.next_event()
        if event is not None:
            return event
        self._raise_if_failed()
        raise StopAsyncIteration

    async def next_event(self) -> TokenEvent | None:
        """The next event, None once the stream ended (whether it failed or not)."""
        while True:
            if self._events:
                return self._events.popleft()
            if self._result is not None:
                return None
            self._wakeup.clear()
            await self._wakeup.wait()

    async def result(self, raise_on_error: bool = True) -> GenerationResult:
        """Wait for the end of the generation (events not yet iterated are kept)."""
        while self._result is None:
            self._wakeup.clear()
            await self._wakeup.wait()
        if raise_on_error:
            self._raise_if_failed()
        return self._result

    def _raise_if_failed(self) -> None:
        assert self._result is not None  # called once the stream ended
        error = error_of(self._result, f"request {self.rid!r} failed")
        if error is not None:
            raise error
