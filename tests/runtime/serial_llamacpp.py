"""One serial llama.cpp engine (batch-invariant: one running sequence, no retained KV) and the
answers the sequential executor at -O0 gives on it: the reference every executor must equal on
llama.cpp (tests/runtime/test_llamacpp_semantics.py). conftest.py holds one engine and one
reference a workflow for the whole session."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace

from ragraph.api.load import compile_catalog
from ragraph.runtime.app import execute
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.executors.base import Services
from ragraph.runtime.llm.protocol import GenerationRequest, GenerationResult, TokenEvent
from ragraph.runtime.llm.stream import GenerationStream
from ragraph.runtime.request import Request
from tests.real import missing, need_module

# Every workflow, every run. Slow: adaptive, flare, ircot, oneshot, recomp and selfrag took 37
# minutes together on 2 cores shared with two other jobs (IRCoT, the longest, writes up to four
# chain sentences per question, each prompt prefilled alone by the serial engine).
QUESTIONS = [
    "Who designed the Eiffel Tower?", "What is the capital of Australia?",
    "When did the Berlin Wall fall?", "Who wrote Pride and Prejudice?",
    "What is the largest planet in the Solar System?", "Who painted the Mona Lisa?",
    "What gas do plants absorb from the air?", "Which river flows through Cairo?",
    "Who developed the theory of general relativity?", "What is the boiling point of water?",
    "Who was the first person on the Moon?", "What language is spoken in Brazil?",
    "Which ocean is the largest?", "Who invented the telephone?",
    "What is the chemical symbol for gold?", "Where is Mount Kilimanjaro?",
    "Who composed the Fifth Symphony?", "What is the currency of Japan?",
    "When did World War II end?", "What is the tallest mountain on Earth?",
]
CAP_TOKENS = 6


class Capped:
    """The engine with every generation capped at `cap` new tokens (the same for all runs)."""

    def __init__(self, engine, cap: int) -> None:
        self._engine, self._cap = engine, cap

    def __getattr__(self, name: str):
        # Everything but `submit` is the engine's own: a field the protocol gains later (as
        # `schedules_batches` did) reaches the scheduler without this wrapper copying it.
        return getattr(self._engine, name)

    def submit(self, request: GenerationRequest):
        params = replace(request.params,
                         max_tokens=min(request.params.max_tokens, self._cap))
        return self._engine.submit(replace(request, params=params))


@dataclass
class Replayed:
    """The serial engine, with each generation it completed replayed to the next identical
    request (prompt and sampling alike) instead of computed again.

    On the serial engine a request's tokens are a function of the request alone, whatever runs
    beside or before it (tests/llm/test_llamacpp.py::
    test_serial_mode_is_exact_under_concurrent_submission), so a replay is the very stream the
    engine would give. An executor that sends the reference's prompts costs no model time; one
    that sends a different prompt (a pass that changed what the model sees) misses and is
    computed, so every answer is still the model's own. It took the llama.cpp exactness tests
    from 17 minutes to a quarter of that (docs/benchmarks/tiers.md)."""

    engine: Capped
    hits: int = 0
    misses: int = 0
    _done: dict[GenerationRequest, tuple[list[TokenEvent], GenerationResult]] = field(
        default_factory=dict)

    def __getattr__(self, name: str):
        return getattr(self.engine, name)

    def submit(self, request: GenerationRequest) -> GenerationStream:
        key = replace(request, rid="replay")
        if key in self._done:
            self.hits += 1
            return self._replay(request.rid, *self._done[key])
        self.misses += 1
        stream = self.engine.submit(request)
        events: list[TokenEvent] = []
        push, finish = stream.push, stream.finish

        def record(event: TokenEvent) -> None:
            events.append(event)
            push(event)

        def keep(result: GenerationResult) -> None:
            if result.finish_reason in ("stop", "length") and not stream.abort_requested:
                self._done[key] = (events, result)
            finish(result)

        # The engine feeds the stream through these two attributes, on the loop thread.
        stream.push, stream.finish = record, keep
        return stream

    def _replay(self, rid: str, events: list[TokenEvent],
                result: GenerationResult) -> GenerationStream:
        stream = GenerationStream(rid, on_abort=lambda _rid: None, engine=self.engine.name)

        def feed() -> None:
            for event in events:
                stream.push(event)
            stream.finish(replace(result, rid=rid))

        asyncio.get_running_loop().call_soon(feed)
        return stream


def open_engine(**overrides):
    need_module("llama_cpp")
    from ragraph.runtime.llm.llamacpp.engine import LlamaCppConfig, LlamaCppEngine

    try:
        return LlamaCppEngine(LlamaCppConfig(n_threads=2, **overrides))
    except Exception as err:  # no model package on this machine
        missing(f"llama.cpp default model unavailable: {err}")


def answers(loop, engine, search, graph, executor: str, passes: str, n: int):
    config = RuntimeConfig.of(engine="llamacpp", executor=executor, passes=passes, concurrency=8)
    requests = [Request(id=f"q{i}", question=q) for i, q in enumerate(QUESTIONS[:n])]
    result = loop.run_until_complete(
        execute(compile_catalog(graph, config.scheduler.passes),
                requests, config, Services(llm=engine, search=search)))
    assert all(o.error is None for o in result.outcomes), [o.error for o in result.outcomes]
    return {o.rid: (o.answer, o.path) for o in result.outcomes}
