"""The engines' own rates, measured alone before a bench run's first cell (`bench.bounds`).

The LLM engine (a fresh one, as every executor gets): prompts of about PROMPT_WORDS words, one
alone and as many at once as the run keeps in flight (up to PREFILL_WORDS words in all), one
token each, for its prefill rate (the better of the two); then short prompts
decoding DECODE_TOKENS tokens, one alone and as many as the run keeps in flight, for the time of
a decode step at those batches. Times are the engine's own timers where it keeps them (llama.cpp,
the simulated GPU) and the wall clock where it does not (an HTTP server: a run of one token is
subtracted from a run of DECODE_TOKENS). Every prompt starts with its own words, so no prefix
cache serves one.

The embedder: PROBE_QUERIES questions one at a time and in one batch. The search engine: those
queries probed and scanned in one balanced step at each nprobe of the run, on the search threads
the run gives it.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlparse

from ragraph.bench.bounds import LlmRates, Rates, fit_decode
from ragraph.ir.nodes import Sampling
from ragraph.runtime.llm.protocol import (
    EngineCounters,
    GenerationRequest,
    GenerationResult,
    LLMEngine,
)
from ragraph.runtime.retrieval.protocol import ScanOrder, SearchTask
from ragraph.runtime.search_service import SearchService

PROMPT_WORDS = 384
PREFILL_WORDS = 6144
DECODE_WORDS = 48
DECODE_TOKENS = 16
PROBE_QUERIES = 16
K = 10
FILLER = ("The river rises in the northern hills and runs south through farmland, past two "
          "market towns and an old mill, before it reaches the sea at a wide estuary. ")


def shares_cores(engine: str, url: str | None) -> bool:
    """Whether the LLM engine computes on this machine's cores: embedded llama.cpp, or a
    server on this host."""
    if engine == "llamacpp":
        return True
    host = urlparse(url or "").hostname or ""
    return engine == "openai" and host in ("localhost", "127.0.0.1", "::1", "0.0.0.0")


async def probe_llm(engine: LLMEngine, batch: int) -> LlmRates:
    """Prefill rate and decode step times of a started engine, alone; `batch`: the most
    sequences the run keeps in flight."""
    await run_prompts(engine, 1, 8, 1)  # untimed: the first call's one-off costs
    most = max(1, min(batch, PREFILL_WORDS // PROMPT_WORDS))
    prefill = [await _prefill(engine, b) for b in sorted({1, most})]
    points = [await _decode(engine, b) for b in sorted({1, batch})]
    timers = all(p.timed for p in prefill) and all(p.timed for p in points)
    return LlmRates(max(p.rate for p in prefill), *fit_decode([p.point for p in points]),
                    "engine timers" if timers else "wall clock")


@dataclass(frozen=True)
class _Measured:
    rate: float = 0.0  # prefill tokens a second
    point: tuple[float, float] = (0.0, 0.0)  # decode: (mean batch, seconds a step)
    timed: bool = True  # by the engine's own timers


async def _prefill(engine: LLMEngine, batch: int) -> _Measured:
    before, start = engine.counters(), time.perf_counter()
    results = await run_prompts(engine, batch, PROMPT_WORDS, 1)
    wall, used = time.perf_counter() - start, _since(engine.counters(), before)
    if used.prefill_s > 0:
        return _Measured(rate=(used.prompt_tokens - used.cached_tokens) / used.prefill_s)
    computed = sum(r.prompt_tokens - r.cached_tokens for r in results)
    return _Measured(rate=computed / wall, timed=False)


async def _decode(engine: LLMEngine, batch: int) -> _Measured:
    before, start = engine.counters(), time.perf_counter()
    results = await run_prompts(engine, batch, DECODE_WORDS, DECODE_TOKENS)
    wall, used = time.perf_counter() - start, _since(engine.counters(), before)
    if used.decode_steps > 0 and used.decode_s > 0:
        return _Measured(point=(used.completion_tokens / used.decode_steps,
                                used.decode_s / used.decode_steps))
    # No timers: the same batch with one token each is the prompts' share of the wall time.
    start = time.perf_counter()
    await run_prompts(engine, batch, DECODE_WORDS, 1)
    first = time.perf_counter() - start
    longest = max(max(r.completion_tokens for r in results), 1)
    return _Measured(point=(sum(r.completion_tokens for r in results) / longest,
                            max(wall - first, 0.0) / max(longest - 1, 1)), timed=False)


async def run_prompts(engine: LLMEngine, count: int, words: int,
                      tokens: int) -> list[GenerationResult]:
    """`count` prompts of about `words` words at once, each with words of its own first; within
    a quarter of the engine's context in words (a word is one to two tokens)."""
    if engine.context_length > 0:
        words = min(words, engine.context_length // 4)
    filler = (FILLER * (words // len(FILLER.split()) + 1)).split()[:words]
    params = Sampling(max_tokens=tokens)
    streams = [engine.submit(GenerationRequest(
        rid=f"probe-{secrets.token_hex(6)}",
        prompt=f"Probe {secrets.token_hex(8)}: " + " ".join(filler), params=params))
        for _ in range(count)]
    return list(await asyncio.gather(*(s.result() for s in streams)))


def _since(after: EngineCounters, before: EngineCounters) -> EngineCounters:
    return EngineCounters(
        prompt_tokens=after.prompt_tokens - before.prompt_tokens,
        cached_tokens=after.cached_tokens - before.cached_tokens,
        completion_tokens=after.completion_tokens - before.completion_tokens,
        prefill_s=after.prefill_s - before.prefill_s, decode_s=after.decode_s - before.decode_s,
        decode_steps=after.decode_steps - before.decode_steps)


def probe_search(search: SearchService, questions: Sequence[str],
                 nprobes: Sequence[int]) -> tuple[float, float, tuple[tuple[int, float], ...]]:
    """(seconds a query embedded, vectors scanned a second, vectors a query scans by nprobe)."""
    texts = list(questions[:PROBE_QUERIES])
    search.embed_many(texts[:1])  # untimed: the first call's one-off costs
    start = time.perf_counter()
    for text in texts:
        search.embed_many([text])
    alone = (time.perf_counter() - start) / len(texts)
    start = time.perf_counter()
    vectors = search.embed_many(texts)
    embed_s = min(alone, (time.perf_counter() - start) / len(texts))
    scanned, seconds, per_query = 0, 0.0, []
    for nprobe in nprobes:
        start = time.perf_counter()
        tasks = [SearchTask.of(v, search.probe(v, nprobe)) for v in vectors]
        step = search.step(tasks, K, ScanOrder.BALANCED)
        seconds += time.perf_counter() - start
        scanned += step.stats.vectors_scanned
        per_query.append((nprobe, step.stats.vectors_scanned / len(tasks)))
    return embed_s, scanned / seconds if seconds > 0 else 0.0, tuple(per_query)


async def probe_rates(engine: LLMEngine, search: SearchService, questions: Sequence[str],
                      nprobes: Sequence[int], batch: int, cores_shared: bool) -> Rates:
    """Every rate a bound needs, each engine alone: the search side first, then the LLM."""
    embed_s, scan, per_query = await asyncio.to_thread(probe_search, search, questions, nprobes)
    async with engine:
        llm = await probe_llm(engine, batch)
    return Rates(llm, embed_s, scan, per_query, cores_shared)
