"""What every LLM engine shares: lifecycle, the in-flight id registry, counters, request checks.

An engine subclasses `EngineBase` and implements `_open`, `_shut`, `_submit` and `_abort`; it
ends every stream through `_end` (or `_fail`), on the asyncio loop thread, so the registry and
the finish counters stay right whichever engine ran the request. Request ids must be unique
while in flight (an abort's stream stays in flight until the engine ends it): llama.cpp, SGLang
and the scheduler's bookkeeping all key on them.
"""

from __future__ import annotations

from typing import ClassVar

from ragraph.errors import EngineError
from ragraph.runtime.llm.failure import cause
from ragraph.runtime.llm.protocol import (
    EngineCounters,
    ErrorKind,
    GenerationRequest,
    GenerationResult,
)
from ragraph.runtime.llm.stream import GenerationStream


def length_problem(n_tokens: int, context_length: int) -> str | None:
    """The one wording of "this prompt does not fit", for engines that count tokens locally
    (they fail the request with kind "input": the request asked for more than the model has)."""
    if context_length > 0 and n_tokens >= context_length:
        return (f"prompt has {n_tokens} tokens but the context length is {context_length} "
                "(prompt plus at least one generated token must fit)")
    return None


def error_result(rid: str, message: str | None, prompt_tokens: int = 0,
                 kind: ErrorKind = "engine") -> GenerationResult:
    """A stream that ends before any token: an error of `kind`, or (message None) an early
    abort."""
    return GenerationResult(rid=rid, text="", token_ids=(),
                            finish_reason="abort" if message is None else "error",
                            prompt_tokens=prompt_tokens, cached_tokens=0, completion_tokens=0,
                            error=message, error_kind=None if message is None else kind)


class EngineBase:
    simulated: ClassVar[bool] = False
    # Whether a request's greedy tokens are the same whatever runs beside it (`LLMEngine`).
    batch_invariant: bool = False
    # Whether ragraph's own code forms its batches (`LLMEngine`).
    schedules_batches: bool = True

    def __init__(self, name: str, context_length: int) -> None:
        self.name = name
        self.context_length = context_length
        self._tally = EngineCounters()
        self._in_flight: dict[str, GenerationStream] = {}
        self._started = False

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        if not self._started:
            await self._open()
            self._started = True

    async def close(self) -> None:
        if self._started:
            self._started = False
            await self._shut()
        for stream in list(self._in_flight.values()):
            self._fail(stream, "engine closed")

    async def __aenter__(self) -> EngineBase:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def counters(self) -> EngineCounters:
        return self._tally.snapshot(simulated=self.simulated)

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    # -- requests --------------------------------------------------------------------------------

    def submit(self, request: GenerationRequest) -> GenerationStream:
        if not self._started:
            raise EngineError(f"{self.name}: engine is not running (start() it, or see the "
                              "error that stopped it)")
        if request.rid in self._in_flight:
            raise EngineError(f"{self.name}: request id {request.rid!r} is already in flight")
        stream = GenerationStream(request.rid, self._abort, self.name)
        self._in_flight[request.rid] = stream
        self._tally.requests += 1
        if request.prompt == "" or request.prompt_ids == ():
            self._fail(stream, "empty prompt")
            return stream
        try:
            self._submit(request, stream)
        except Exception as err:  # this request's failure: its stream says why, none hangs
            message, kind = cause(err, self.name)
            self._fail(stream, f"{self.name}: {message}", kind=kind)
        return stream

    def _end(self, stream: GenerationStream, result: GenerationResult) -> None:
        """End a stream (loop thread): release its id, deliver the result, count how it ended
        (as the stream took it: an abort nobody asked for counts as a failure)."""
        if self._in_flight.get(stream.rid) is stream:
            del self._in_flight[stream.rid]
        if not stream.done:
            stream.finish(result)
            self._tally.count_finish(stream.final.finish_reason)  # type: ignore[union-attr]

    def _fail(self, stream: GenerationStream, message: str, prompt_tokens: int = 0,
              kind: ErrorKind = "engine") -> None:
        self._end(stream, error_result(stream.rid, message, prompt_tokens, kind))

    # -- what an engine implements ---------------------------------------------------------------

    async def _open(self) -> None:
        """Load the model / connect / start the engine's own task or thread."""

    async def _shut(self) -> None:
        """Stop taking work and free resources; streams left open are failed afterwards."""

    def _submit(self, request: GenerationRequest, stream: GenerationStream) -> None:
        raise NotImplementedError

    def _abort(self, rid: str) -> None:
        """Stop `rid` at the engine's next step; its stream then ends with finish_reason abort."""
