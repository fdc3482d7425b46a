"""The generation side of the wavefront: every request's generation chains as engine streams,
the cache-aware prefill order, and speculative instances that are adopted only when the
committed prompt is identical. Stream output comes back through the run's inbox."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable

from ragraph.program.program import GenerationChain
from ragraph.runtime.executors.base import Services, clock
from ragraph.runtime.generate import engine_request
from ragraph.runtime.llm.chat import Prompt, prompt_text
from ragraph.runtime.llm.protocol import PromptSegments
from ragraph.runtime.outcome import RunStats
from ragraph.runtime.scheduler import policies
from ragraph.runtime.scheduler.backoff import SpeculationBackoff
from ragraph.runtime.scheduler.engine_gauge import EngineGauge
from ragraph.runtime.scheduler.inbox import Generated, Inbox, Token
from ragraph.runtime.scheduler.jobs import GenJob
from ragraph.runtime.scheduler.live import LiveRequest
from ragraph.runtime.scheduler.recent import RecentPrompts

RECENT_PROMPTS = 64


class GenerationSide:
    """The queue of generations waiting for room in the engine, and every stream running in it
    (by key, for the engine's reports); each job's request holds the rest."""

    def __init__(self, services: Services, capacity: int, tau: float, counters: RunStats,
                 inbox: Inbox) -> None:
        self.s, self.capacity, self.tau, self.n, self.inbox = services, capacity, tau, counters, inbox
        self.jobs: dict[int, GenJob] = {}  # every job with a stream, by key
        self.ready: list[GenJob] = []  # real jobs waiting for room in the engine
        self.waited: dict[int, int] = {}
        self.seconds = policies.RunningMean()
        self.busy = policies.BusyMeter()
        # Prompts recently sent to the engine, for estimating prefix-cache hits (RAGCache).
        self.recent = RecentPrompts(RECENT_PROMPTS)
        self._keys = itertools.count()
        self.gauge = EngineGauge()
        # Which retrievals may speculate, from how the recent speculations settled.
        self.backoff = SpeculationBackoff(counters, services.hooks)
        # The real generations the retrievals in flight are about to start (the wavefront
        # wires `RetrievalSide.feeding`).
        self.upcoming: Callable[[], int] = lambda: 0

    @property
    def load(self) -> int:
        return len(self.jobs)

    def has_room(self) -> bool:
        """Room for speculation: the engine is not the bottleneck and its generation stage is
        under-utilized (T_curr/T_max < tau; the load as `policies.speculation_load` counts
        it)."""
        share = self.busy.sample(self.s.llm.counters().busy_s, clock())
        if policies.engine_is_bottleneck(share, self.tau):
            return False
        load = policies.speculation_load(self.load, self.upcoming(), share)
        return policies.has_spare_capacity(load, self.capacity, self.tau)

    @property
    def engine_alone(self) -> bool:
        """The engine batches on its own (a GPU or a server), off this machine's cores."""
        return self.s.llm.simulated or not self.s.llm.schedules_batches

    def engine_share(self) -> float | None:
        """The engine's recent busy share where it batches on its own (None elsewhere, or
        until measured)."""
        if not self.engine_alone:
            return None
        return self.busy.sample(self.s.llm.counters().busy_s, clock())

    def feed_cap(self, last: int, per_query_ms: float | None = None,
                 search_ms: float | None = None) -> int | None:
        """The cap on the next embedding batch that keeps the engine from waiting on it
        (`policies.feed_batch`), from the real generations it holds or that wait for room."""
        held = [j for j in self.jobs.values() if not j.speculative]
        holding = len(self.ready) + len(held)
        drain = None if self.load >= self.capacity else self.drain_ms(held)
        return policies.feed_batch(holding, self.seconds.value is not None, last, drain,
                                   per_query_ms, search_ms)

    def drain_ms(self, held: list[GenJob]) -> float | None:
        """The most the generations `held` can still take on an engine that batches on its
        own (`EngineGauge.drain_ms`)."""
        if not self.engine_alone:
            return None
        left = [max(j.chain.sampling.max_tokens - j.tokens, 0) for j in held]
        return self.gauge.drain_ms(self.s.llm.counters(), left)

    def verify(self, req: LiveRequest, chain: GenerationChain, prompt: Prompt) -> GenJob | None:
        """Speculation's commit point: adopt `chain`'s speculative instance when it started on
        the prompt the committed values render (equal prompts give equal greedy outputs), else
        roll it back. The instance adopted, if any."""
        rid, spec = req.rid, req.speculative.pop(chain.origin, None)
        if spec is None:
            return None
        if spec.prompt != prompt or spec.failed:
            self._roll_back(spec)
            return None
        self.n.speculation_hits += 1
        spec.speculative = False
        self._settled(spec, adopted=True)
        self.s.hooks.text(rid, chain.origin, chain.output, spec.text)  # its text so far
        if spec.tokens and req.state.first_token_at is None:
            req.state.first_token_at = clock()
        return spec

    def start(self, req: LiveRequest, chain: GenerationChain, prompt: Prompt,
              layout: PromptSegments | None = None, branch: int = 0) -> GenJob:
        """A new real generation of `chain` (of one branch of a map), queued for the engine."""
        job = GenJob(next(self._keys), req, clock(), chain=chain, prompt=prompt, layout=layout,
                     branch=branch)
        self.ready.append(job)
        self.waited[job.key] = 0
        return job

    def speculate(self, req: LiveRequest, chain: GenerationChain, prompt: Prompt,
                  layout: PromptSegments | None = None) -> None:
        """Start `chain` early on a partial value; it stays speculative until verified."""
        if chain.origin in req.jobs:
            return
        old = req.speculative.pop(chain.origin, None)
        if old is not None:
            self._roll_back(old)
        job = GenJob(next(self._keys), req, clock(), chain=chain, prompt=prompt, layout=layout,
                     speculative=True)
        self._submit(job)
        req.speculative[chain.origin] = job
        self.n.speculations += 1
        self.s.hooks.speculated(req.rid, chain.origin)

    def drop_speculation(self, req: LiveRequest, origin: str) -> None:
        spec = req.speculative.pop(origin, None)
        if spec is not None:
            self._roll_back(spec)

    def start_ready(self) -> list[GenJob]:
        """Submit waiting generations while the engine has room, in cache-aware order, or in
        the critical path's where the engine batches on its own (`order_for_engine`, its
        prompts paced by `_paced`); the jobs that started (a prefetch may start with them)."""
        if not self.ready:
            return []
        candidates = [self._candidate(j) for j in self.ready]
        order = (policies.order_for_engine(candidates) if self.engine_alone
                 else policies.order_prefills(candidates))
        by_key = {str(j.key): j for j in self.ready}
        room = max(self.capacity - self.load, 0)
        chosen = self._paced([by_key[k] for k in order[:room]])
        going = {j.key for j in chosen}
        self.ready = [by_key[k] for k in order if by_key[k].key not in going]
        for job in self.ready:
            self.waited[job.key] += 1
        for job in chosen:
            self.waited.pop(job.key, None)
            self.recent.forget(job.key)
            self._submit(job)
        return chosen

    def _paced(self, chosen: list[GenJob]) -> list[GenJob]:
        """`chosen` less the prompts leading to no search that must wait for the engine's
        critical-path generations (`policies.leaves_to_release`)."""
        if not self.engine_alone:
            return chosen
        c = self.s.llm.counters()
        free = self.gauge.free_prompt_tokens(c)
        if free is None:
            return chosen
        held = [j for j in self.jobs.values() if not j.speculative]
        critical = any(j.chain.leads_to_search for j in [*held, *chosen])
        leaves = [j for j in chosen if not j.chain.leads_to_search]
        prefilling = sum(self.gauge.tokens(c, prompt_text(j.prompt)) for j in held
                         if not j.chain.leads_to_search and not j.tokens)
        n = policies.leaves_to_release(critical, free, prefilling,
                                       [self.gauge.tokens(c, prompt_text(j.prompt))
                                        for j in leaves])
        late = {j.key for j in leaves[n:]}
        return [j for j in chosen if j.key not in late]

    def _candidate(self, job: GenJob) -> policies.PrefillCandidate:
        """Cached length estimated as the longest prefix shared with a recent prompt: what a
        prefix-caching engine (SGLang's radix cache, llama.cpp's prefix store) reuses."""
        text = prompt_text(job.prompt)
        shared = self.recent.shared(job.key, text)
        group = text[:job.layout.docs_end] if job.layout else None
        return policies.PrefillCandidate(str(job.key), cached_tokens=shared,
                                         prompt_tokens=max(len(text), 1),
                                         waited_cycles=self.waited.get(job.key, 0),
                                         arrival=job.key, group=group,
                                         critical=job.chain.leads_to_search)

    def _submit(self, job: GenJob) -> None:
        chain = job.chain
        self.jobs[job.key] = job
        try:
            request = engine_request(f"{job.req.rid}/{chain.origin}/{job.key}", job.prompt,
                                     chain.sampling, job.layout)
            job.stream = self.s.llm.submit(request)
        except Exception as err:  # an invalid request, or the engine refused it: this one only
            self.inbox.put(Generated(job.key, None, err))
            return
        job.started = clock()
        text = prompt_text(job.prompt)
        self.gauge.submitted(text)
        self.recent.add(text)
        job.task = asyncio.create_task(self._drain(job))

    async def _drain(self, job: GenJob) -> None:
        """Relay a stream to the inbox: its tokens, then its result (a failed one too: the
        scheduler reads whose fault it was from the result)."""
        assert job.stream is not None
        try:
            while (event := await job.stream.next_event()) is not None:
                self.inbox.put(Token(job.key, event))
            self.inbox.put(Generated(job.key, job.stream.final))
        except Exception as err:  # a bug relaying it: this request's failure only
            self.inbox.put(Generated(job.key, None, err))

    def token(self, event: Token) -> GenJob | None:
        job = self.jobs.get(event.key)
        if job is None:
            return None
        job.tokens += 1
        job.text += event.event.text
        if not job.speculative and job.state.first_token_at is None:
            job.state.first_token_at = clock()
        # A map's branch writes one item of a list, not its output's text: not streamed.
        if not job.speculative and job.fan is None:
            self.s.hooks.text(job.req.rid, job.origin, job.chain.output, event.event.text)
        return job

    def ended(self, event: Generated) -> GenJob | None:
        """A generation ended: the job (None when nobody waits for it any more)."""
        job = self.jobs.pop(event.key, None)
        if job is None:
            return None
        job.result, job.error = event.result, event.error or job.error
        if job.speculative and job.failed:
            # The engine failed or stopped it on its own: it can never be adopted, so the
            # commit point starts the real generation instead.
            self._forget(job)
            return None
        if job.speculative and job.result is not None and job.result.finish_reason == "abort":
            return None  # rolled back: it left `speculative` when it was aborted
        if not job.speculative:
            self.seconds.add(clock() - job.started)
            self._trace(job)
        return job

    def _forget(self, spec: GenJob) -> None:
        """A speculative instance that ended unusable leaves `speculative` (if it still is)."""
        if spec.req.speculative.get(spec.origin) is spec:
            del spec.req.speculative[spec.origin]
            self._roll_back(spec)

    def _roll_back(self, spec: GenJob) -> None:
        """A speculative instance is discarded (its partial top-k changed, or the committed
        prompt differs): what it decoded is the rollback's cost."""
        self._abort(spec)
        self.n.rollbacks += 1
        self.n.rollback_tokens += spec.tokens
        self._settled(spec, adopted=False)

    def _settled(self, spec: GenJob, adopted: bool) -> None:
        """Report a speculation's end, and trace it on its request's track from its start."""
        rid, origin = spec.req.rid, spec.origin
        self.backoff.settled(adopted)
        self.s.hooks.speculation(rid, origin, adopted=adopted)
        self.s.tracer.add_span(spec.req.name, f"speculate {origin}", spec.started, clock(),
                               engine=False, outcome="adopted" if adopted else "rolled back",
                               tokens=spec.tokens)

    def _trace(self, job: GenJob) -> None:
        end, name = clock(), job.req.name  # the caller's id, where it gave one
        self.s.tracer.add_span(name, f"generate {job.origin}", job.started, end, engine=False)
        self.s.tracer.add_span("llm", f"{name} {job.origin}", job.started, end)

    def _abort(self, job: GenJob) -> None:
        if job.stream is not None:
            job.stream.abort()

    def abort_all(self) -> None:
        """The run is over: stop every stream it still has in the engine."""
        for job in list(self.jobs.values()):
            self._abort(job)

    def release(self, held: list[GenJob]) -> None:
        """A request retired (its streams are aborted): drop its jobs from the queues."""
        for job in held:
            if self.waited.pop(job.key, None) is not None:
                self.ready.remove(job)
                self.recent.forget(job.key)
            self.jobs.pop(job.key, None)
