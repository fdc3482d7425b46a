"""`GenerationStream`: the consumer's handle on one in-flight generation.

Engines feed a stream only from the asyncio loop thread (a thread-backed engine hops over with
`loop.call_soon_threadsafe`), so the stream needs no locks.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from ragraph.errors import EngineError
from ragraph.runtime.llm.protocol import GenerationResult, TokenEvent


class GenerationStream:
    """Async iterator of `TokenEvent`s, in decode order, ending with a `GenerationResult`.

    Iterating raises `EngineError` if the request failed; `abort()` asks the engine to stop the
    request at its next step (the result then has finish_reason "abort" and the tokens so far).
    """

    def __init__(self, rid: str, on_abort: Callable[[str], None]) -> None:
        self.rid = rid
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
            self._result = result
            self._wakeup.set()

    def fail(self, message: str, prompt_tokens: int = 0) -> None:
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
            )
        )

    # -- consumer side ---------------------------------------------------------------------------

    @property
    def done(self) -> bool:
        return self._result is not None

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
        while True:
            if self._events:
                return self._events.popleft()
            if self._result is not None:
                if self._result.finish_reason == "error":
                    raise EngineError(f"request {self.rid!r} failed: {self._result.error}")
                raise StopAsyncIteration
            self._wakeup.clear()
            await self._wakeup.wait()

    async def result(self, raise_on_error: bool = True) -> GenerationResult:
        """Wait for the end of the generation (events not yet iterated are kept)."""
        while self._result is None:
            self._wakeup.clear()
            await self._wakeup.wait()
        if raise_on_error and self._result.finish_reason == "error":
            raise EngineError(f"request {self.rid!r} failed: {self._result.error}")
        return self._result
