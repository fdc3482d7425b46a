"""The simulated LLM engine: deterministic text, GPU-calibrated timing, no GPU.

It continuous-batches like a serving engine, with that engine's own step policy (batching.py:
vLLM V1's token budget by default, SGLang's as an option): one step clock; each step computes
the prompt tokens and decode tokens its policy picks, and lasts what the cost model's
`step_s` says: by default interpolated from the H100 / Llama-3.1-8B profile measured on a GPU, the
roofline outside it (profiled.py). Its name says which. It waits with the clock's `sleep` (asyncio.sleep by default), so it burns no CPU and overlaps
with real CPU retrieval exactly as a GPU would. Steps follow each other on the simulated GPU's own
timeline: a step starts when the previous one ended, not when this process got round to waking
up (a serving engine's GPU runs in its own process; this loop shares the interpreter with the
scheduler and the search threads, and under load it wakes late by a sizeable share of a decode
step: docs/benchmarks/code-figures.md#the-simulated-engine). A request joins the first step that
starts after it was submitted. Everything it reports is labelled simulated.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ragraph.errors import ConfigError
from ragraph.runtime.llm.base import EngineBase, length_problem
from ragraph.runtime.llm.chat import STAND_IN, stand_in
from ragraph.runtime.llm.failure import cause
from ragraph.runtime.llm.protocol import (
    GenerationRequest,
    GenerationResult,
    TokenEvent,
    positions,
)
from ragraph.runtime.llm.sim.batching import Batching, StepPlan, plan_step
from ragraph.runtime.llm.sim.clock import Clock, RealClock
from ragraph.runtime.llm.sim.costmodel import LlmCostModel
from ragraph.runtime.llm.sim.profile import default_profile
from ragraph.runtime.llm.sim.profiled import ProfiledCostModel
from ragraph.runtime.llm.sim.text import BlockPrefixCache, OutputPlan, plan_output, tokenize
from ragraph.runtime.llm.stream import GenerationStream
from ragraph.runtime.llm.textout import OutputText

if TYPE_CHECKING:
    from ragraph.runtime.llm.settings import LlmConfig


@dataclass(frozen=True)
class SimConfig:
    cost: LlmCostModel = field(default_factory=lambda: ProfiledCostModel(default_profile()))
    # Llama-3.1-8B's vocabulary and a common serving context (its maximum is 131,072).
    vocab_size: int = 128256
    context_length: int = 32768
    mean_output_tokens: float = 64.0
    # Replay output lengths from a trace instead of the exponential distribution.
    output_lengths: tuple[int, ...] | None = None
    # Which serving engine's step policy, its token budget, its running-request cap
    # (vLLM's max_num_seqs and SGLang's max_running_requests: 256 here) and SGLang's
    # --enable-mixed-chunk (batching.py).
    batching: Batching = field(default_factory=Batching)
    # KV capacity for the prefix cache: (80 GB HBM - 16 GB weights - ~4 GB activations) /
    # 128 KiB per token = ~458k tokens; 0 disables prefix caching.
    prefix_cache_tokens: int = 458_000
    prefix_block_tokens: int = 16
    name: str = "sim"  # the engine's name adds the cost model's label

    def __post_init__(self) -> None:
        if isinstance(self.output_lengths, list):
            object.__setattr__(self, "output_lengths", tuple(self.output_lengths))
        for name in ("vocab_size", "context_length", "prefix_block_tokens"):
            if getattr(self, name) < 1:
                raise ConfigError(name, f"must be >= 1, got {getattr(self, name)}")
        if self.mean_output_tokens <= 0:
            raise ConfigError("mean_output_tokens", "must be > 0")
        if self.output_lengths is not None and (
            not self.output_lengths or min(self.output_lengths) < 1
        ):
            raise ConfigError("output_lengths", "must be a non-empty tuple of lengths >= 1")
        if self.prefix_cache_tokens < 0:
            raise ConfigError("prefix_cache_tokens", "must be >= 0")

    @classmethod
    def of(cls, llm: LlmConfig, in_flight: int = 0) -> SimConfig:
        """The simulated engine on the LLM part's profile (a bad file fails here) and step
        policy; it holds up to `batching.max_running` requests whatever the run's `in_flight`."""
        from ragraph.runtime.llm.sim.profiled import cost_model_for  # noqa: PLC0415

        return cls(cost=cost_model_for(llm.profile), batching=llm.batching())


@dataclass(eq=False)  # a sequence is itself: `in` and `remove` go by identity
class _Seq:
    stream: GenerationStream
    request: GenerationRequest
    prompt_ids: tuple[int, ...]
    plan: OutputPlan
    out: OutputText
    submitted: float = 0.0
    cached: int = 0
    admitted: bool = False
    computed: int = 0  # prompt tokens in the KV cache (reused ones included)
    produced: int = 0
    last_token_at: float = 0.0
    behind_prompts: bool = False  # a step with prompt work ran since its last token

    @property
    def prompt_left(self) -> int:
        return len(self.prompt_ids) - self.computed


class SimEngine(EngineBase):
    """`LLMEngine` with simulated timing; see the module docstring."""

    simulated = True
    batch_invariant = True

    def __init__(self, config: SimConfig | None = None, clock: Clock | None = None) -> None:
        self.config = config or SimConfig()
        super().__init__(f"{self.config.name} ({self.config.cost.label})",
                         self.config.context_length)
        self._clock = clock or RealClock()
        self._prefix = BlockPrefixCache(self.config.prefix_cache_tokens,
                                        self.config.prefix_block_tokens)
        self._pending: deque[_Seq] = deque()
        self._running: list[_Seq] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._crash = "closed"  # why the step loop is not running, once it is not

    async def _open(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _shut(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        self._pending.clear()
        self._running.clear()

    def tokenize(self, text: str) -> tuple[int, ...]:
        return tokenize(text, self.config.vocab_size)

    @property
    def chat_template(self) -> str:
        return STAND_IN

    def _submit(self, request: GenerationRequest, stream: GenerationStream) -> None:
        if self._task is None or self._task.done():
            self._fail(stream, f"{self.name}: the simulator stopped ({self._crash})")
            return
        text = request.prompt if request.messages is None else stand_in(request.messages)
        ids = request.prompt_ids if request.prompt_ids is not None else self.tokenize(text or "")
        problem = length_problem(len(ids), self.context_length)
        if problem:
            self._fail(stream, f"{self.name}: {problem}", prompt_tokens=len(ids), kind="input")
            return
        p = request.params
        plan = plan_output(ids, p.max_tokens, seed=p.seed, greedy=p.greedy,
                           mean_output_tokens=self.config.mean_output_tokens,
                           output_lengths=self.config.output_lengths,
                           vocab_size=self.config.vocab_size,
                           line_breaks="\n" not in p.stop)
        self._pending.append(_Seq(stream, request, ids, plan, OutputText(p.stop),
                                  submitted=self._clock.now()))
        self._wake.set()

    def _abort(self, rid: str) -> None:
        for seq in list(self._pending):
            if seq.request.rid == rid and seq.stream.abort_requested:
                self._pending.remove(seq)
                self._finish(seq, "abort")
        # A running sequence stops at the next step boundary (see _advance).
        self._wake.set()

    async def _run(self) -> None:
        """The step loop; a bug in it fails every open request with the cause (and later ones
        at submission) instead of leaving them to wait forever."""
        try:
            await self._steps()
        except Exception as err:
            message, kind = cause(err, self.name)
            self._crash = f"crashed: {message}"
            for seq in [*self._pending, *self._running]:
                self._fail(seq.stream, f"{self.name}: the simulator {self._crash}", kind=kind)
            self._pending.clear()
            self._running.clear()

    async def _steps(self) -> None:
        end: float | None = None  # when the last step ended on the GPU's timeline (None: idle)
        idle_from = self._clock.now()
        while True:
            if not self._pending and not self._running:
                idle_from = idle_from if end is None else end
                self._wake.clear()
                await self._wake.wait()
                end = None
                continue
            start = self._clock.now() if end is None else end
            if not self._running:  # idle since `end`: the GPU starts with the first request
                start = max(start, self._pending[0].submitted)
            self._tally.idle_s += max(start - (idle_from if end is None else end), 0.0)
            plan = self._plan(start)
            decoding = plan.decodes
            prefill = plan.prompt_tokens
            context = sum(len(s.prompt_ids) + s.produced for s in decoding)
            step_s = self.config.cost.step_s(prefill, len(decoding), context)
            end = start + step_s
            await self._clock.sleep(max(end - self._clock.now(), 0.0))
            self._count(plan, step_s, context)
            for seq, take in plan.chunks:
                seq.computed += take
                if not seq.prompt_left and not self._caches_ahead:
                    self._prefix.insert(seq.prompt_ids)
            self._advance(plan, end)

    def _plan(self, start: float) -> StepPlan[_Seq]:
        """The step's work under the engine's policy; the sequences it admits join `_running`."""
        waiting = list(itertools.takewhile(lambda s: s.submitted <= start, self._pending))
        plan = plan_step(self.config.batching, self._running, waiting, self._left,
                         self._cache_ahead)
        for _ in range(plan.admitted):
            seq = self._pending.popleft()
            seq.admitted = True
            self._running.append(seq)
            self._tally.prompt_tokens += len(seq.prompt_ids)
            self._tally.cached_tokens += seq.cached
        if plan.prompt_tokens:  # every decoding sequence now waits for the prompt work
            for seq in self._running:
                if seq.produced and not seq.prompt_left:
                    seq.behind_prompts = True
        return plan

    @property
    def _caches_ahead(self) -> bool:
        """vLLM's policy caches a chunk's blocks as it is planned (`_cache_ahead`), SGLang's
        after the batch that computed the prompt."""
        return self.config.batching.policy == "vllm"

    def _cache_ahead(self, seq: _Seq, take: int) -> None:
        """The full blocks a planned chunk computes, cached before the step runs (vLLM's
        policy: `batching.plan_step`)."""
        self._prefix.insert(seq.prompt_ids[:seq.computed + take])

    def _left(self, seq: _Seq) -> int:
        """Prompt tokens `seq` still computes; a waiting one's prefix-cache hit is looked up as
        the policy reaches it (as a server does at admission)."""
        if not seq.admitted:
            seq.cached = seq.computed = self._prefix.lookup(seq.prompt_ids)
        return seq.prompt_left

    def _count(self, plan: StepPlan[_Seq], step_s: float, context: int) -> None:
        """Simulated seconds, so a bench can say how busy the simulated GPU was. A step that
        computes prompt tokens is a prompt pass: the decode tokens riding in it cost the pass no
        more than their share of its prompt work, so they count in no decode step, neither as
        sequences nor as positions attended (`EngineCounters`: those of decode passes)."""
        t = self._tally
        t.steps += 1
        if plan.prompt_tokens:
            t.prefill_s += step_s
            t.count_prompt_pass(plan.prompt_tokens)
            t.mixed_steps += bool(plan.decodes)
        elif plan.decodes:
            t.decode_s += step_s
            t.decode_steps += 1
            t.decode_only_steps += 1
            t.decode_tokens += len(plan.decodes)
            t.decode_context += context
        t.prefill_context += sum(positions(s.computed, take) for s, take in plan.chunks)

    def _advance(self, plan: StepPlan[_Seq], end: float) -> None:
        """At the end of a step, each sequence it advanced produces its next token (or ends):
        the decoding ones, and those whose prompt it finished. Aborts end at any step."""
        stepped = {id(s) for s in plan.decodes}
        stepped.update(id(s) for s, _ in plan.chunks if not s.prompt_left)
        for seq in list(self._running):
            if seq.stream.abort_requested:
                self._finish(seq, "abort")
            elif id(seq) in stepped:
                self._next_token(seq, end)

    def _next_token(self, seq: _Seq, end: float) -> None:
        plan, i = seq.plan, seq.produced
        if seq.behind_prompts:
            self._tally.worst_decode_wait_s = max(self._tally.worst_decode_wait_s,
                                                  end - seq.last_token_at)
            seq.behind_prompts = False
        seq.last_token_at = end
        if i >= len(plan.token_ids):
            self._finish(seq, "stop" if plan.ends_naturally else "length")
            return
        seq.produced += 1
        self._tally.completion_tokens += 1
        delta = seq.out.add(plan.pieces[i])
        lp = plan.logprobs[i] if seq.request.params.logprobs else None
        seq.stream.push(TokenEvent(plan.token_ids[i], delta, lp))
        if seq.out.stopped:
            self._finish(seq, "stop")
        elif seq.produced == len(plan.token_ids) and not plan.ends_naturally:
            self._finish(seq, "length")

    def _finish(self, seq: _Seq, reason: str) -> None:
        if seq in self._running:
            self._running.remove(seq)
        tail = seq.out.flush()
        if tail:
            seq.stream.push(TokenEvent(None, tail))
        n = seq.produced
        self._end(seq.stream, GenerationResult(
            rid=seq.request.rid, text=seq.out.text, token_ids=seq.plan.token_ids[:n],
            finish_reason=reason,  # type: ignore[arg-type]
            prompt_tokens=len(seq.prompt_ids), cached_tokens=seq.cached, completion_tokens=n,
            logprobs=seq.plan.logprobs[:n] if seq.request.params.logprobs else None,
            simulated=True,
        ))
