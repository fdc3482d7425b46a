"""The decode thread of the llama.cpp engine: continuous batching over one llama.cpp context.

Each iteration admits new requests, then runs two `llama_decode` passes: one token of every
decoding sequence, then prefill chunks of new ones (timed apart: the bench's prefill/decode
split), samples a token for every sequence whose last token was in a pass, and hands the
resulting events to the asyncio loop in one call. Sequences join and leave between iterations.
"""

from __future__ import annotations

import queue
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ragraph.runtime.llm.base import error_result, length_problem
from ragraph.runtime.llm.failure import cause
from ragraph.runtime.llm.llamacpp import sampling
from ragraph.runtime.llm.llamacpp.admission import AdmissionRule, admit
from ragraph.runtime.llm.llamacpp.model import BatchEntry, LlamaModel
from ragraph.runtime.llm.llamacpp.seqs import Seq, forwards, plan_step
from ragraph.runtime.llm.llamacpp.slots import SeqSlots
from ragraph.runtime.llm.protocol import (
    EngineCounters,
    ErrorKind,
    GenerationRequest,
    GenerationResult,
    TokenEvent,
)
from ragraph.runtime.llm.stream import GenerationStream
from ragraph.runtime.llm.textout import OutputText


@dataclass(frozen=True)
class Submit:
    request: GenerationRequest
    stream: GenerationStream


@dataclass(frozen=True)
class Abort:
    rid: str


class Stop:
    pass


# What the loop thread applies to one stream: events, then the result if it ended.
Delivery = tuple[GenerationStream, list[TokenEvent], GenerationResult | None]


@dataclass(frozen=True)
class WorkerLimits:
    context_length: int  # per sequence: prompt + generated tokens
    max_running: int  # sequences decoding at once
    admission: AdmissionRule = AdmissionRule()


class DecodeWorker:
    def __init__(self, model: LlamaModel, slots: SeqSlots, limits: WorkerLimits, tally: EngineCounters,
                 post: Callable[[list[Delivery]], None]) -> None:
        self.inbox: queue.SimpleQueue[Submit | Abort | Stop] = queue.SimpleQueue()
        self._model = model
        self._slots = slots
        self._last_pass_s = 0.0
        self._copies_applied = 0  # slots.copies as of the last pass (llama.cpp applies them in it)
        self._limits = limits
        self._tally = tally
        self._post = post
        self._waiting: deque[Seq] = deque()
        self._running: list[Seq] = []
        self._out: list[Delivery] = []

    # -- the loop --------------------------------------------------------------------------------

    def run(self) -> None:
        try:
            while self._take_commands():
                self._admit()
                if self._running:
                    self._step()
                self._flush()
        except BaseException as e:
            # A bug or a llama.cpp failure: every open stream learns why, then the thread dies
            # with the traceback (threading.excepthook prints it).
            self._post_crash(repr(e))
            raise
        self._shutdown()

    def _take_commands(self) -> bool:
        """Apply queued commands; block while idle. False when asked to stop."""
        idle = not self._running and not self._waiting
        while True:
            try:
                cmd = self.inbox.get(block=idle)
            except queue.Empty:
                return True
            idle = False
            if isinstance(cmd, Stop):
                return False
            if isinstance(cmd, Abort):
                self._abort(cmd.rid)
            else:
                self._accept(cmd)

    def _flush(self) -> None:
        if self._out:
            self._post(self._out)
            self._out = []

    # -- admission -------------------------------------------------------------------------------

    def _accept(self, cmd: Submit) -> None:
        req, stream = cmd.request, cmd.stream
        if stream.abort_requested:
            self._fail_early(stream, None)
            return
        try:
            prompt = list(req.prompt_ids) if req.prompt_ids is not None else self._model.tokenize(req.prompt or "")
        except Exception as e:  # this request's failure (a bug is logged); the batch goes on
            message, kind = cause(e, "llama.cpp")
            self._fail_early(stream, message, kind=kind)
            return
        problem = self._check_prompt(req, prompt)
        if problem:
            self._fail_early(stream, *problem, n_prompt=len(prompt))
            return
        p = req.params
        rng = None if p.greedy else np.random.default_rng(p.seed)
        seq = Seq(req, stream, prompt, len(prompt), -1, OutputText(p.stop), rng)
        self._waiting.append(seq)

    def _check_prompt(self, req: GenerationRequest,
                      prompt: list[int]) -> tuple[str, ErrorKind] | None:
        """What is wrong with a prompt and whose fault it is (one over the context: the
        request's)."""
        if (req.prompt is not None and req.prompt == "") or not prompt:
            return "empty prompt", "engine"
        too_long = length_problem(len(prompt), self._limits.context_length)
        if too_long:
            trained = self._model.n_ctx_train
            if trained > self._limits.context_length:  # ragraph's default, not the model's limit
                too_long += (f"; the model reads up to {trained:,} tokens: raise `ctx` "
                             "(--ctx, [llm] ctx in a config file, Runtime(ctx=...))")
            return too_long, "input"
        bad = [t for t in prompt if not 0 <= t < self._model.n_vocab]
        if bad:
            return (f"prompt_ids has token {bad[0]} outside the vocabulary "
                    f"(0..{self._model.n_vocab - 1})", "engine")
        return None

    def _fail_early(self, stream: GenerationStream, message: str | None,
                    kind: ErrorKind = "engine", n_prompt: int = 0) -> None:
        self._out.append((stream, [], error_result(stream.rid, message, n_prompt, kind)))

    def _admit(self) -> None:
        """Move waiting sequences into the batch while sequence ids allow (cache-aware)."""
        for seq in admit(self._waiting, self._running, self._slots, self._limits.max_running,
                         self._limits.admission):
            self._tally.prompt_tokens += seq.n_prompt
            self._tally.cached_tokens += seq.cached

    # -- one step --------------------------------------------------------------------------------

    def _step(self) -> None:
        self._slots.compact(self._running)
        plan = plan_step(self._running, self._model.shape.n_batch)
        if plan.decode:
            # Counted before the pass moves n_past; by token kind (`StepPlan`).
            generating, context = len(plan.generating()), plan.decode_context()
            prompt_context = plan.pass_prompt_context()
            if not self._run_pass(plan.decode_pass()):
                return  # a sequence was ended with the error; plan again
            self._tally.decode_s += self._last_pass_s
            self._tally.decode_steps += 1
            # Fillers' and prompts' last tokens ride in it: a mixed pass (`StepPlan`).
            if generating < len(plan.decode) + len(plan.fill):
                self._tally.mixed_steps += 1
            else:
                self._tally.decode_only_steps += 1
            self._tally.decode_tokens += generating
            self._tally.decode_context += context
            self._tally.prefill_context += prompt_context
        context = plan.prefill_context()
        if plan.prefill and self._run_pass(plan.prefill):
            self._tally.prefill_s += self._last_pass_s
            self._tally.prefill_context += context
            self._tally.prefill_forwards += forwards(
                [(seq.seq_id, take) for seq, take in plan.prefill], self._model.shape.n_batch)
            # The pass, not its forwards: the forwards of one call share its fixed costs.
            self._tally.count_prompt_pass(sum(take for _, take in plan.prefill))
        self._tally.steps += 1

    def _run_pass(self, plan: list[tuple[Seq, int]]) -> bool:
        """One llama_decode over `plan`, then a token sampled for every sequence whose last
        pending token was in it."""
        entries: list[BatchEntry] = []
        sample_at: list[tuple[Seq, int]] = []
        for seq, take in plan:
            for j in range(take):
                pos = seq.n_past + j
                last = pos == len(seq.tokens) - 1
                if last:
                    sample_at.append((seq, len(entries)))
                entries.append(BatchEntry(seq.tokens[pos], pos, seq.seq_id, last))
        self._count_copies()
        start = time.perf_counter()
        ok = self._decode(entries)
        self._last_pass_s = time.perf_counter() - start
        if not ok:
            return False
        for seq, take in plan:
            seq.n_past += take
        for seq, index in sample_at:
            self._next_token(seq, self._model.logits(index))
        return True

    def _count_copies(self) -> None:
        """The copies made since the last pass: llama.cpp applies them as this one starts."""
        made = self._slots.copies - self._copies_applied
        if made:
            self._tally.kv_copies += made
            self._tally.copy_passes += 1
            self._copies_applied = self._slots.copies

    def _decode(self, entries: list[BatchEntry]) -> bool:
        """Run the batch; when llama.cpp fails it, the youngest sequence ends with the error."""
        rc = self._model.decode(entries)
        if rc == 0:
            return True
        victim = self._running[-1]
        msg = ("no KV slot for the batch" if rc == 1 else f"llama_decode failed with status {rc}")
        self._end(victim, "error", error=msg)
        return False  # the batch is re-planned next iteration without the victim

    def _next_token(self, seq: Seq, row: np.ndarray) -> None:
        p = seq.request.params
        token = sampling.greedy(row) if seq.rng is None else sampling.sample(row, p.temperature, p.top_p, seq.rng)
        logprob = sampling.log_softmax_at(row, token) if p.logprobs else None
        if self._model.is_eog(token):
            self._end(seq, "stop")
            return
        seq.tokens.append(token)
        seq.generated.append(token)
        if logprob is not None:
            seq.logprobs.append(logprob)
        self._tally.completion_tokens += 1
        text = seq.out.add(self._model.piece(token))
        if seq.out.stopped:
            reason = "stop"
        elif len(seq.generated) >= p.max_tokens or len(seq.tokens) >= self._limits.context_length:
            reason = "length"
        else:
            self._out.append((seq.stream, [TokenEvent(token, text, logprob)], None))
            return
        self._end(seq, reason, TokenEvent(token, text + seq.out.flush(), logprob))

    def _end(self, seq: Seq, reason: str, last: TokenEvent | None = None, error: str | None = None) -> None:
        events = [last] if last is not None else []
        tail = seq.out.flush()
        if tail:
            events.append(TokenEvent(None, tail))
        self._running.remove(seq)
        self._slots.release(seq)
        result = GenerationResult(
            rid=seq.rid, text=seq.out.text, token_ids=tuple(seq.generated),
            finish_reason=reason,  # type: ignore[arg-type]
            prompt_tokens=seq.n_prompt, cached_tokens=seq.cached,
            completion_tokens=len(seq.generated),
            logprobs=tuple(seq.logprobs) if seq.request.params.logprobs else None, error=error)
        self._out.append((seq.stream, events, result))

    def _abort(self, rid: str) -> None:
        for seq in self._running:
            if seq.rid == rid:
                self._end(seq, "abort")
                return
        for seq in self._waiting:
            if seq.rid == rid:
                self._waiting.remove(seq)
                self._fail_early(seq.stream, None, n_prompt=seq.n_prompt)
                return
        # Not here yet: _accept sees the stream's abort flag.

    def _shutdown(self) -> None:
        for seq in list(self._running):
            self._end(seq, "error", error="engine closed")
        for seq in self._waiting:
            self._fail_early(seq.stream, "engine closed", n_prompt=seq.n_prompt)
        self._waiting.clear()
        self._flush()

    def _post_crash(self, message: str) -> None:
        crashed = [*self._running, *self._waiting]
        self._running, self._waiting = [], deque()
        self._out.extend((seq.stream, [], error_result(
            seq.rid, f"llama.cpp decode thread crashed: {message}")) for seq in crashed)
        self._flush()
