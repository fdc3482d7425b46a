"""An engine wrapper that stops chosen generations on its own, ending them with finish_reason
"abort" as SGLang does for a request it drops: nobody asked it to, so it must never read as a
(short) answer."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ragraph.runtime.llm.protocol import GenerationRequest
from ragraph.runtime.llm.stream import GenerationStream


class StopsOnItsOwn:
    """`victim(rid)` is asked at submission; a victim is stopped once it has relayed
    `after_tokens` tokens (0: at once, before any)."""

    def __init__(self, inner, victim: Callable[[str], bool],  # noqa: ANN001 - an engine
                 after_tokens: int = 1) -> None:
        self.inner, self.victim, self.after_tokens = inner, victim, after_tokens
        self.stopped: list[str] = []

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    async def __aenter__(self) -> StopsOnItsOwn:
        await self.inner.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.inner.__aexit__(*exc)

    def submit(self, request: GenerationRequest) -> GenerationStream:
        inner = self.inner.submit(request)
        out = GenerationStream(request.rid, lambda _: inner.abort(), "stops-on-its-own")
        stop_after = self.after_tokens if self.victim(request.rid) else None
        if stop_after == 0:
            inner.abort()
        asyncio.get_running_loop().create_task(self._relay(inner, out, stop_after))
        return out

    async def _relay(self, inner: GenerationStream, out: GenerationStream,
                     stop_after: int | None) -> None:
        relayed = 0
        while (event := await inner.next_event()) is not None:
            out.push(event)
            relayed += 1
            if relayed == stop_after:
                inner.abort()
        result = await inner.result(raise_on_error=False)
        if result.finish_reason == "abort" and not out.abort_requested:
            self.stopped.append(out.rid)
        out.finish(result)
