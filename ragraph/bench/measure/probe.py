"""The engines' own rates, measured alone before a bench run's first cell and again after its
last (`bench.measure.bounds`).

The LLM engine (a fresh one, as every executor gets), on prompts of exact token counts (the
engine's own tokenizer; words where it has none), each starting with its own words so that no
prefix cache serves one:
- prefill: a prompt of PREFILL_TOKENS (one full llama.cpp pass) alone, twice, and as many at
  once as the run keeps in flight (up to BATCH_TOKENS in all), one token each; and one of
  LONG_TOKENS. The rate of the best of the short ones and the long one's slower tokens give the
  cost of a prompt token at position 0 and of each position it attends to.
- decode: prompts of DECODE_PROMPT tokens decoding DECODE_TOKENS, one alone and as many as the
  run keeps in flight, the long prompt decoding alone, and as many as the run keeps in flight on
  longer prompts (up to BATCH_TOKENS in all): a step's fixed cost, its cost a sequence, and a
  position attended at the cheaper of one sequence's steps and the run's batch (a GPU reads a
  batch's KV cache far cheaper a position than one sequence's: on the simulated H100 0.04-0.09
  us against 0.7, which priced a run's decode steps over their time). The one prompt of
  DECODE_PROMPT tokens alone is also the smallest prompt pass probed: no pass is priced below
  the cheaper of its time and a decode step's fixed cost.
Times are the engine's own timers where it keeps them (llama.cpp, the simulated GPU) and the
wall clock where it does not (an HTTP server: a run of one token is subtracted from a run of
DECODE_TOKENS; positions are then not priced).

The embedder and the search engine: `search_probe`.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlparse

from ragraph.bench.measure.bounds import LlmRates, Rates, fit_line
from ragraph.bench.measure.search_probe import probe_search
from ragraph.errors import EngineError
from ragraph.ir.nodes import Sampling
from ragraph.runtime.llm.protocol import (
    EngineCounters,
    GenerationRequest,
    GenerationResult,
    LLMEngine,
)
from ragraph.runtime.search_service import SearchService

PREFILL_TOKENS = 512
LONG_TOKENS = 1536
BATCH_TOKENS = 4096
DECODE_PROMPT = 64
DECODE_TOKENS = 16
FILLER = ("The river rises in the northern hills and runs south through farmland, past two "
          "market towns and an old mill, before it reaches the sea at a wide estuary. ")

# A request of a prompt of this many tokens, decoding that many (token ids where the engine
# tokenizes, else text).
Prompter = Callable[[int, int], GenerationRequest]


def shares_cores(engine: str, url: str | None) -> bool:
    """Whether the LLM engine computes on this machine's cores: embedded llama.cpp, or a
    server on this host."""
    if engine == "llamacpp":
        return True
    host = urlparse(url or "").hostname or ""
    return engine == "openai" and host in ("localhost", "127.0.0.1", "::1", "0.0.0.0")


@dataclass(frozen=True)
class _Run:
    """What the engine counted for one batch of probe prompts, and the wall time it took."""

    used: EngineCounters
    wall_s: float
    results: tuple[GenerationResult, ...]

    @property
    def timed(self) -> bool:
        return self.used.prefill_s > 0

    def prefill_point(self) -> tuple[float, float]:
        """(a computed token's mean position, its seconds)."""
        computed = max(self.used.prompt_tokens - self.used.cached_tokens, 1)
        seconds = self.used.prefill_s if self.timed else self.wall_s
        return self.used.prefill_context / computed, seconds / computed

    def decode_point(self) -> tuple[float, float, float]:
        """(a step's mean batch, its mean positions attended, its seconds)."""
        steps = max(self.used.decode_steps, 1)
        sequences = self.used.decode_tokens or self.used.completion_tokens
        return sequences / steps, self.used.decode_context / steps, self.used.decode_s / steps


async def probe_llm(engine: LLMEngine, batch: int) -> LlmRates:
    """Prefill and decode rates of a started engine, alone; `batch`: the most sequences the
    run keeps in flight."""
    await run_prompts(engine, 1, 8, 1)  # untimed: the first call's one-off costs
    prompt = await _prompter(engine)
    most = max(1, min(batch, BATCH_TOKENS // PREFILL_TOKENS))
    short = [await _run(engine, prompt, b, PREFILL_TOKENS, 1) for b in (1, 1, most)]
    long = await _run(engine, prompt, 1, LONG_TOKENS, DECODE_TOKENS)
    steps = [await _run(engine, prompt, b, DECODE_PROMPT, DECODE_TOKENS) for b in sorted({1, batch})]
    timed = all(r.timed for r in [*short, long, *steps])
    if not timed:
        return await _by_wall_clock(engine, prompt, short, steps)
    wide = await _run(engine, prompt, batch, _wide_prompt(batch), DECODE_TOKENS)
    token_s, pos_s = _prefill_costs(short, long)
    step_s, per_seq, context_s = _decode_costs(steps, long, wide)
    alone = steps[0].used  # one prompt of DECODE_PROMPT tokens: the smallest pass probed
    pass_s = min(step_s, alone.prefill_s / max(sum(alone.prompt_passes), 1))
    return LlmRates(1 / token_s if token_s > 0 else float("inf"), step_s, per_seq,
                    "engine timers", prefill_pos_s=pos_s, context_s=context_s, pass_s=pass_s)


def _prefill_costs(short: Sequence[_Run], long: _Run) -> tuple[float, float]:
    """(seconds a prompt token at position 0, plus seconds a position it attends to): the line
    through the best short prompt alone and the long one, then the best of any batch at it."""
    alone = min((r.prefill_point() for r in short[:2]), key=lambda p: p[1])
    at_zero, per_pos = fit_line([alone, long.prefill_point()])
    if per_pos == 0:  # longer prompts no slower a token (a fixed cost a pass): the cheaper
        at_zero = min(alone[1], long.prefill_point()[1])
    best = min(y - per_pos * x for x, y in (r.prefill_point() for r in short))
    return min(at_zero, max(best, 0.0)), per_pos


def _wide_prompt(batch: int) -> int:
    """Tokens a prompt of the run's batch on longer prompts: BATCH_TOKENS over the batch, at
    least twice DECODE_PROMPT (the contexts must differ), at most PREFILL_TOKENS."""
    return min(PREFILL_TOKENS, max(2 * DECODE_PROMPT, BATCH_TOKENS // max(batch, 1)))


def _decode_costs(steps: Sequence[_Run], long: _Run, wide: _Run) -> tuple[float, float, float]:
    """(a step's fixed seconds, a sequence's, a position's): the position cost from the same
    batch at two contexts, one sequence's and the run's batch's, the cheaper of the two (a lower
    bound wherever the cost a position falls with the batch); then the line through the
    batches without it."""
    context_s = min(_position_cost(steps[0], long), _position_cost(steps[-1], wide))
    points = [(b, t - context_s * ctx) for b, ctx, t in (r.decode_point() for r in steps)]
    return (*fit_line(points), context_s)


def _position_cost(short: _Run, longer: _Run) -> float:
    """Seconds a position attended, from a batch's decode steps at two contexts."""
    (_, ctx, t), (_, ctx_longer, t_longer) = short.decode_point(), longer.decode_point()
    return max((t_longer - t) / (ctx_longer - ctx), 0.0) if ctx_longer > ctx else 0.0


async def _by_wall_clock(engine: LLMEngine, prompt: Prompter, short: Sequence[_Run],
                         steps: Sequence[_Run]) -> LlmRates:
    """Rates of an engine without timers: prompts' wall time, and for decoding, the same
    batch with one token each subtracted; positions not priced."""
    token_s = min(r.prefill_point()[1] for r in short)
    points = []
    for run in steps:
        count = len(run.results)
        first = await _run(engine, prompt, count, DECODE_PROMPT, 1)
        longest = max(max(r.completion_tokens for r in run.results), 1)
        points.append((sum(r.completion_tokens for r in run.results) / longest,
                       max(run.wall_s - first.wall_s, 0.0) / max(longest - 1, 1)))
    return LlmRates(1 / token_s, *fit_line(points), "wall clock")


async def _prompter(engine: LLMEngine) -> Prompter:
    """Requests of exact token counts where the engine tokenizes (each prompt's own words
    first, then the filler's tokens), else of about that many words."""
    try:
        filler = await asyncio.to_thread(engine.tokenize, FILLER * 8)
        filler = filler[len(await asyncio.to_thread(engine.tokenize, "")):]  # BOS: the head's
    except (EngineError, NotImplementedError, AttributeError):  # no tokenizer
        filler = ()

    def request(tokens: int, max_tokens: int) -> GenerationRequest:
        params = Sampling(max_tokens=max_tokens)
        rid, head = f"probe-{secrets.token_hex(6)}", f"Probe {secrets.token_hex(8)}: "
        if not filler:
            # About 4 tokens for 3 words: within `tokens`.
            return GenerationRequest(rid=rid, prompt=head + _words(tokens * 3 // 4),
                                     params=params)
        own = engine.tokenize(head)
        body = (filler * (tokens // len(filler) + 1))[: max(tokens - len(own), 0)]
        return GenerationRequest(rid=rid, prompt_ids=tuple(own) + body, params=params)

    return request


async def _run(engine: LLMEngine, prompt: Prompter, count: int, tokens: int,
               max_tokens: int) -> _Run:
    """`count` probe prompts of `tokens` tokens at once, within the engine's context."""
    if engine.context_length > 0:
        tokens = min(tokens, engine.context_length - max_tokens - 1)
    before, start = engine.counters(), time.perf_counter()
    streams = [engine.submit(prompt(tokens, max_tokens)) for _ in range(count)]
    results = tuple(await asyncio.gather(*(s.result() for s in streams)))
    return _Run(engine.counters().since(before), time.perf_counter() - start, results)


def _words(count: int) -> str:
    return " ".join((FILLER * (count // len(FILLER.split()) + 1)).split()[:count])


async def run_prompts(engine: LLMEngine, count: int, words: int,
                      tokens: int) -> list[GenerationResult]:
    """`count` prompts of about `words` words at once, each with words of its own first; within
    a quarter of the engine's context in words (a word is one to two tokens)."""
    if engine.context_length > 0:
        words = min(words, engine.context_length // 4)
    params = Sampling(max_tokens=tokens)
    streams = [engine.submit(GenerationRequest(
        rid=f"probe-{secrets.token_hex(6)}",
        prompt=f"Probe {secrets.token_hex(8)}: " + _words(words), params=params))
        for _ in range(count)]
    return list(await asyncio.gather(*(s.result() for s in streams)))


async def probe_rates(engine: LLMEngine, search: SearchService, questions: Sequence[str],
                      nprobes: Sequence[int], batch: int, cores_shared: bool,
                      cores: int) -> Rates:
    """Every rate a bound needs, each engine alone: the search side first (on one thread and
    on `cores`), then the LLM."""
    found = await asyncio.to_thread(probe_search, search, questions, nprobes, cores, batch)
    async with engine:
        llm = await probe_llm(engine, batch)
    return Rates(llm, found.embed_s, found.scan_vec_s, found.per_query, cores_shared, cores,
                 found.embed_core_s, found.embed_tok_s, found.embed_tok_core_s,
                 found.probe_tokens)
