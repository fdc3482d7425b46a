"""An engine wrapper that refuses chosen requests at submission: a refused submission must fail
only its own request. (Every engine rejects an id that is still in flight itself: EngineBase.)"""

from __future__ import annotations

from ragraph.errors import EngineError
from ragraph.runtime.llm.protocol import GenerationRequest
from ragraph.runtime.llm.stream import GenerationStream


class RefusingEngine:
    def __init__(self, inner, refuse: str | None = None) -> None:
        self.inner = inner
        self.refuse = refuse  # prompts containing this text are refused at submit()
        self.submitted = 0

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    async def __aenter__(self) -> RefusingEngine:
        await self.inner.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.inner.__aexit__(*exc)

    def submit(self, request: GenerationRequest) -> GenerationStream:
        if self.refuse is not None and self.refuse in (request.prompt or ""):
            raise EngineError(f"refused {request.rid!r}")
        stream = self.inner.submit(request)
        self.submitted += 1
        return stream
