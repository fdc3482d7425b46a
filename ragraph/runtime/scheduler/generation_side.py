"""The generation side of the wavefront: engine streams per request, the cache-aware prefill
order, and speculative instances that are adopted only when the committed prompt is identical."""

from __future__ import annotations

import asyncio
import itertools
import os
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass

from ragraph.ir.nodes import Generate
from ragraph.runtime import effects
from ragraph.runtime.executors.base import Services, clock
from ragraph.runtime.generate import generated_text, generation_request
from ragraph.runtime.request import RequestState
from ragraph.runtime.scheduler import policies
from ragraph.runtime.scheduler.jobs import GenJob

RECENT_PROMPTS = 64


@dataclass
class Counters:
    speculations: int = 0
    hits: int = 0
    rollbacks: int = 0
    clusters: int = 0
    steps: int = 0
    scanned: int = 0
    on_acc: int = 0
    prefetch_errors: int = 0
    last_prefetch_error: str = ""


@dataclass
class GenerationHooks:
    """What the generation side reports back to the run."""

    finished: Callable[[RequestState], None]  # output applied: advance the request
    failed: Callable[[RequestState, BaseException], None]
    started: Callable[[RequestState, Generate], None]  # a real generation began (prefetch)
    streamed: Callable[[GenJob], None]  # a token arrived (speculative retrieval)


class GenerationSide:
    def __init__(self, services: Services, capacity: int, counters: Counters,
                 hooks: GenerationHooks) -> None:
        self.s, self.capacity, self.n, self.hooks = services, capacity, counters, hooks
        self.running: dict[str, GenJob] = {}  # by request id
        self.speculative: dict[str, GenJob] = {}
        self.ready: list[RequestState] = []
        self.waited: Counter[str] = Counter()
        self.arrival: dict[str, int] = {}
        self.seconds = policies.RunningMean()
        # Prompts recently sent to the engine, for estimating prefix-cache hits (RAGCache).
        self.recent: deque[str] = deque(maxlen=RECENT_PROMPTS)
        # Engine ids must be unique while in flight: an aborted speculation may still be
        # draining when the same node is submitted again, so every submission gets its own.
        self.submissions = itertools.count()

    @property
    def load(self) -> int:
        return len(self.running) + len(self.speculative)

    def admit(self, state: RequestState) -> None:
        self.arrival[state.rid] = len(self.arrival)

    def start_ready(self) -> None:
        """Settle speculations, then start ready generations in cache-aware order while there
        is room in the engine."""
        self._settle()
        if not self.ready:
            return
        prompts: dict[str, str] = {}
        for state in list(self.ready):
            try:
                node = state.graph.node(state.node)
                prompts[state.rid] = effects.generation_prompt(node, state.variables)
            except Exception as err:
                self.ready.remove(state)
                self.hooks.failed(state, err)
        order = policies.order_prefills([self._candidate(s, prompts[s.rid]) for s in self.ready])
        by_rid = {s.rid: s for s in self.ready}
        chosen = order[:max(self.capacity - self.load, 0)]
        for rid in chosen:
            state = by_rid[rid]
            try:
                self.submit(state, state.graph.node(state.node), prompts[rid], False)
            except Exception as err:  # the engine refused this request only
                self.hooks.failed(state, err)
        self.ready = [by_rid[r] for r in order[len(chosen):]]
        for state in self.ready:
            self.waited[state.rid] += 1

    def _candidate(self, state: RequestState, prompt: str) -> policies.PrefillCandidate:
        """Cached length estimated as the longest prefix shared with a recent prompt: what a
        prefix-caching engine (SGLang's radix cache, llama.cpp's retained sequences) reuses."""
        shared = max((len(os.path.commonprefix((prompt, p))) for p in self.recent), default=0)
        return policies.PrefillCandidate(state.rid, cached_tokens=shared,
                                         prompt_tokens=max(len(prompt), 1),
                                         waited_cycles=self.waited[state.rid],
                                         arrival=self.arrival[state.rid])

    def submit(self, state: RequestState, node: Generate, prompt: str, speculative: bool) -> GenJob:
        attempt = next(self.submissions)
        stream = self.s.llm.submit(generation_request(state.rid, node, prompt, attempt))
        job = GenJob(state, node, prompt, stream, clock(), speculative=speculative)
        self.recent.append(prompt)
        (self.speculative if speculative else self.running)[state.rid] = job
        job.task = asyncio.create_task(self._drain(job))
        if speculative:
            self.n.speculations += 1
        else:
            self.hooks.started(state, node)
        return job

    def drop_speculation(self, rid: str, rolled_back: bool = True) -> None:
        spec = self.speculative.pop(rid, None)
        if spec is not None:
            spec.stream.abort()
            self.n.rollbacks += int(rolled_back)

    def release(self, rid: str) -> None:
        self.drop_speculation(rid, rolled_back=False)
        self.arrival.pop(rid, None)
        self.waited.pop(rid, None)

    def _settle(self) -> None:
        """Ready generations with a speculative instance adopt it or roll it back first: they
        already hold an engine slot, so they never wait for room."""
        waiting = []
        for state in self.ready:
            spec = self.speculative.pop(state.rid, None)
            if spec is None or not self._adopt(spec, state, state.graph.node(state.node)):
                waiting.append(state)
        self.ready = waiting

    def _adopt(self, spec: GenJob, state: RequestState, node: Generate) -> bool:
        try:
            prompt = effects.generation_prompt(node, state.variables)
        except Exception:
            prompt = None  # the committed values cannot render it: the normal path reports why
        if spec.node.id != node.id or spec.prompt != prompt or spec.error is not None:
            spec.stream.abort()
            self.n.rollbacks += 1
            return False
        self.n.hits += 1
        spec.speculative = False
        if spec.tokens and state.first_token_at is None:
            state.first_token_at = clock()
        self.running[state.rid] = spec
        if spec.result is not None:  # it already finished while the search was completing
            self._done(spec)
        return True

    async def _drain(self, job: GenJob) -> None:
        try:
            async for event in job.stream:
                job.tokens += 1
                job.text += event.text
                if not job.speculative and job.state.first_token_at is None:
                    job.state.first_token_at = clock()
                self.hooks.streamed(job)
            job.result = await job.stream.result(raise_on_error=False)
        except Exception as err:  # the engine failed this request only
            job.error = err
        if job.speculative and job.result and job.result.finish_reason == "abort":
            return
        self._done(job)

    def _done(self, job: GenJob) -> None:
        if job.speculative:
            return  # adopted later (or aborted); its result waits on the job
        self.running.pop(job.state.rid, None)
        end = clock()
        self.seconds.add(end - job.started)
        tracer = self.s.tracer
        tracer.add_span(job.state.rid, f"generate {job.node.id}", job.started, end, engine=False)
        tracer.add_span("llm", f"{job.state.rid} {job.node.id}", job.started, end)
        try:
            if job.error is not None:
                raise job.error
            text = generated_text(job.result)
            effects.apply_generation(job.node, job.state.variables, text, text.min_prob)
        except Exception as err:
            self.hooks.failed(job.state, err)
            return
        self.hooks.finished(job.state)
