"""An engine wrapper as strict as the real engines about request ids, and able to refuse chosen
requests at submission: the executors must never reuse an id that is still in flight (llama.cpp
and SGLang reject it), and a refused submission must fail only its own request."""

from __future__ import annotations

from ragraph.errors import EngineError
from ragraph.runtime.llm.protocol import GenerationRequest
from ragraph.runtime.llm.stream import GenerationStream


class StrictEngine:
    def __init__(self, inner, refuse: str | None = None) -> None:
        self.inner = inner
        self.refuse = refuse  # prompts containing this text are refused at submit()
        self._streams: dict[str, GenerationStream] = {}
        self.submitted = 0

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    async def __aenter__(self) -> StrictEngine:
        await self.inner.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.inner.__aexit__(*exc)

    def submit(self, request: GenerationRequest) -> GenerationStream:
        # An aborted stream stays in flight until the engine has finished it, as in llama.cpp.
        self._streams = {rid: s for rid, s in self._streams.items() if not s.done}
        if request.rid in self._streams:
            raise EngineError(f"strict: request id {request.rid!r} is already in flight")
        if self.refuse is not None and self.refuse in (request.prompt or ""):
            raise EngineError(f"strict: refused {request.rid!r}")
        stream = self.inner.submit(request)
        self._streams[request.rid] = stream
        self.submitted += 1
        return stream
