"""The wavefront scheduler (HedraRAG): every cycle, the ready sub-stages of all requests go to both
engines at once — a budgeted batch of cluster searches to the search thread, generations to the LLM
engine — and the requests advance as results come back.

    admit → start generations → speculate → dispatch a search step → wait → collect → advance

Answers are those of the source graph run node by node: each request follows `choose_edge` on its
own variables; searches are exact whatever the step split or cluster order; a speculative
generation is adopted only when its prompt equals the one the committed values render.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import ClassVar

from ragraph.ir.control import choose_edge
from ragraph.ir.nodes import END, Generate, Retrieve
from ragraph.runtime import effects
from ragraph.runtime.catalog import Catalog
from ragraph.runtime.executors.base import OnDone, Services, admit, advance, clock, describe_failure, finish
from ragraph.runtime.generate import generated_text, generation_request
from ragraph.runtime.outcome import RunStats
from ragraph.runtime.request import Request, RequestState
from ragraph.runtime.retrieval.cost import CostModel, calibrate
from ragraph.runtime.retrieval.locality import History
from ragraph.runtime.scheduler import policies
from ragraph.runtime.scheduler.jobs import GenJob, RetJob
from ragraph.runtime.scheduler.plan import ExecutionPlan
from ragraph.runtime.scheduler.search_worker import CycleResult, run_cycle


@dataclass(frozen=True)
class SchedulerConfig:
    max_active: int = 64  # requests admitted at once
    max_generations: int = 64  # concurrent engine streams (T_max of the generation stage)
    tau: float = 0.6  # speculate only while generation load / capacity < tau
    initial_beta_ms: float = 0.3  # per-sub-stage overhead before it is measured
    budget_ms: float | None = None  # fixed sub-stage budget instead of sqrt(2·β·t_R)
    warm_after_tokens: int = 12  # speculative retrieval: partial text length that triggers it
    # Speculate on a partial top-k only once it changed at most this much over the last step
    # (1 - Jaccard): an unsettled partial result is usually rolled back, wasting engine time.
    spec_max_drift: float = 0.0
    link_bytes_per_s: float = 25e9  # prefetch budget = bandwidth x expected generation time

    def __post_init__(self) -> None:
        from ragraph.errors import ConfigError

        for name in ("max_active", "max_generations", "warm_after_tokens"):
            if getattr(self, name) < 1:
                raise ConfigError(name, f"must be >= 1, got {getattr(self, name)}")
        if not 0 < self.tau <= 1:
            raise ConfigError("tau", f"must be in (0, 1], got {self.tau}")


@dataclass
class _Counters:
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
class WavefrontExecutor:
    name: ClassVar[str] = "ragraph"
    services: Services
    passes: str = "-O2"
    config: SchedulerConfig = field(default_factory=SchedulerConfig)

    async def run(self, catalog: Catalog, arrivals: AsyncIterator[Request], on_done: OnDone) -> RunStats:
        run = _Run(self.services, catalog.compiled(self.passes), self.config, on_done)
        return await run.main(arrivals)


class _Run:
    """State of one scheduler run (one instance per `run` call: no state leaks across runs)."""

    def __init__(self, services: Services, catalog: Catalog, config: SchedulerConfig,
                 on_done: OnDone) -> None:
        self.s, self.catalog, self.cfg, self.on_done = services, catalog, config, on_done
        self.inbox: list[tuple[Request, float]] = []
        self.active: dict[str, RequestState] = {}
        self.gens: dict[str, GenJob] = {}  # by request id (at most one real + one speculative)
        self.spec_gens: dict[str, GenJob] = {}
        self.rets: dict[int, RetJob] = {}
        self.history: dict[str, History] = {}
        self.ready_gens: list[RequestState] = []
        self.waited: Counter[str] = Counter()
        self.wake = asyncio.Event()
        self.arrivals_done = False
        self.search_future: asyncio.Future | None = None
        self.next_key = 0
        self.n = _Counters()
        self.beta = policies.RunningMean(value=config.initial_beta_ms)
        self.t_r = policies.RunningMean()
        self.cost: CostModel | None = None
        self.arrival_order: dict[str, int] = {}
        self.gen_s = policies.RunningMean()
        # The accelerator tier, when the search engine has one (TieredEngine).
        self.cache = getattr(services.search.engine, "cache", None)

    # ----- the loop ------------------------------------------------------------------------------

    async def main(self, arrivals: AsyncIterator[Request]) -> RunStats:
        loop = asyncio.get_running_loop()
        self.cost = await loop.run_in_executor(None, calibrate, self.s.search.engine, 0.2)
        feeder = asyncio.create_task(self._feed(arrivals))
        while not (self.arrivals_done and not self.inbox and not self.active):
            self._admit()
            self._start_generations()
            self._dispatch_search()
            await self._wait()
            self._collect_search()
        await feeder
        if self.search_future is not None:  # a warm-only step still running: let it end
            await asyncio.wait([self.search_future])
        return RunStats(
            speculations=self.n.speculations, speculation_hits=self.n.hits,
            rollbacks=self.n.rollbacks, clusters_searched=self.n.clusters,
            search_steps=self.n.steps, vectors_scanned=self.n.scanned,
            vectors_on_accelerator=self.n.on_acc,
            extra={"beta_ms": self.beta.value or 0.0, "t_r_ms": self.t_r.value or 0.0,
                   "prefetch_errors": float(self.n.prefetch_errors)},
        )

    async def _feed(self, arrivals: AsyncIterator[Request]) -> None:
        async for request in arrivals:
            self.inbox.append((request, clock()))
            self.wake.set()
        self.arrivals_done = True
        self.wake.set()

    async def _wait(self) -> None:
        await self.wake.wait()
        self.wake.clear()

    # ----- admit and advance ---------------------------------------------------------------------

    def _admit(self) -> None:
        while self.inbox and len(self.active) < self.cfg.max_active:
            request, arrived = self.inbox.pop(0)
            state = admit(self.catalog, request, arrived)
            if state.error is not None:
                finish(state, self.on_done, clock())
                continue
            self.active[state.rid] = state
            self.arrival_order[state.rid] = len(self.arrival_order)
            self._advance(state)

    def _advance(self, state: RequestState) -> None:
        """Follow control edges until the request waits on an engine or ends."""
        try:
            nxt = advance(state)
        except Exception as err:
            return self._fail(state, err)
        if nxt == END:
            self._retire(state)
            return None
        node = state.graph.node(nxt)
        if isinstance(node, Generate):
            self.ready_gens.append(state)  # a speculative instance is checked when it starts
            return None
        if self.spec_gens.get(state.rid) is not None:
            self._drop_speculation(state.rid)  # the request did not go where it speculated
            self.n.rollbacks += 1
        if isinstance(node, Retrieve):
            self._new_retrieval(state, node)
        return None

    def _plan(self, state: RequestState) -> ExecutionPlan:
        return self.catalog.plan_for(state.graph)

    def _fail(self, state: RequestState, err: BaseException) -> None:
        state.error = describe_failure(err)
        self._retire(state)

    def _retire(self, state: RequestState) -> None:
        """The request is done (answered or failed): release everything it holds."""
        self._drop_speculation(state.rid)
        for key in [k for k, j in self.rets.items() if j.state is state and not j.in_flight]:
            self.rets.pop(key)
        self.history.pop(state.rid, None)
        if self.cache is not None:
            self.cache.release(state.rid)
        self.active.pop(state.rid, None)
        finish(state, self.on_done, clock())

    # ----- generations ---------------------------------------------------------------------------

    def _start_generations(self) -> None:
        self._settle_speculations()
        room = self.cfg.max_generations - len(self.gens) - len(self.spec_gens)
        order = policies.order_prefills([
            policies.PrefillCandidate(s.rid, 0, 1, self.waited[s.rid], self.arrival_order[s.rid])
            for s in self.ready_gens
        ])
        by_rid = {s.rid: s for s in self.ready_gens}
        chosen = order[:max(room, 0)]
        for rid in chosen:
            state = by_rid[rid]
            try:
                node = state.graph.node(state.node)
                prompt = effects.generation_prompt(node, state.variables)
                self._submit(state, node, prompt, speculative=False)
            except Exception as err:
                self._fail(state, err)
        self.ready_gens = [by_rid[r] for r in order[len(chosen):]]
        for state in self.ready_gens:
            self.waited[state.rid] += 1

    def _settle_speculations(self) -> None:
        """Ready generations with a speculative instance adopt it or roll it back first: they
        already hold an engine slot, so they never wait for room."""
        waiting = []
        for state in self.ready_gens:
            spec = self.spec_gens.pop(state.rid, None)
            if spec is None or not self._adopt(spec, state, state.graph.node(state.node)):
                waiting.append(state)
        self.ready_gens = waiting

    def _submit(self, state: RequestState, node: Generate, prompt: str, speculative: bool) -> GenJob:
        attempt = len(state.path) * 2 + (1 if speculative else 0)
        stream = self.s.llm.submit(generation_request(state.rid, node, prompt, attempt))
        job = GenJob(state, node, prompt, stream, clock(), speculative=speculative)
        (self.spec_gens if speculative else self.gens)[state.rid] = job
        job.task = asyncio.create_task(self._drain(job))
        if not speculative:
            self._prefetch(state, node)
        return job

    def _prefetch(self, state: RequestState, node: Generate) -> None:
        """TeleRAG lookahead: while a generation that produces a retrieval query runs, load the
        clusters nearest to the text already known, within what the link moves meanwhile."""
        plan = self._plan(state).generation(node.id)
        if self.cache is None or plan.prefetch_for is None:
            return
        known = "\n".join(str(state.variables[v]) for v in plan.prefetch_known
                          if v in state.variables)
        if not known.strip():
            return
        budget = policies.prefetch_budget_bytes(self.cfg.link_bytes_per_s, self.gen_s.value or 0.5)
        search, cache, owner = self.s.search, self.cache, state.rid

        def load() -> None:
            cache.prefetch(search.embed(known), budget, owner)

        future = asyncio.get_running_loop().run_in_executor(None, load)
        future.add_done_callback(self._prefetch_done)

    def _prefetch_done(self, future: asyncio.Future) -> None:
        """A failed prefetch costs only speed (searches still run on the CPU tier): counted."""
        if future.exception() is not None:
            self.n.prefetch_errors += 1
            self.n.last_prefetch_error = repr(future.exception())

    async def _drain(self, job: GenJob) -> None:
        try:
            async for event in job.stream:
                job.tokens += 1
                job.text += event.text
                if not job.speculative and job.state.first_token_at is None:
                    job.state.first_token_at = clock()
                self._maybe_warm(job)
            job.result = await job.stream.result(raise_on_error=False)
        except Exception as err:  # the engine failed this request only
            job.error = err
        if job.speculative and job.result and job.result.finish_reason == "abort":
            return
        self._on_generation_done(job)

    def _on_generation_done(self, job: GenJob) -> None:
        if job.speculative:
            return  # adopted later (or aborted); its result waits on the job
        self.gens.pop(job.state.rid, None)
        end = clock()
        self.gen_s.add(end - job.started)
        self.s.tracer.add_span(job.state.rid, f"generate {job.node.id}", job.started, end,
                               engine=False)
        self.s.tracer.add_span("llm", f"{job.state.rid} {job.node.id}", job.started, end)
        try:
            if job.error is not None:
                raise job.error
            text = generated_text(job.result)
            effects.apply_generation(job.node, job.state.variables, text, text.min_prob)
        except Exception as err:
            return self._fail(job.state, err)
        self._advance(job.state)
        self.wake.set()
        return None

    def _adopt(self, spec: GenJob, state: RequestState, node: Generate) -> bool:
        """Adopt a speculative generation if the committed values render the same prompt."""
        try:
            prompt = effects.generation_prompt(node, state.variables)
        except Exception:
            prompt = None
        if spec.node.id != node.id or spec.prompt != prompt or spec.error is not None:
            spec.stream.abort()
            self.n.rollbacks += 1
            return False
        self.n.hits += 1
        spec.speculative = False
        if spec.tokens and state.first_token_at is None:
            state.first_token_at = clock()
        self.gens[state.rid] = spec
        if spec.result is not None:  # it already finished while the search was completing
            self._on_generation_done(spec)
        return True

    def _drop_speculation(self, rid: str) -> None:
        spec = self.spec_gens.pop(rid, None)
        if spec is not None:
            spec.stream.abort()

    # ----- retrievals ----------------------------------------------------------------------------

    def _new_retrieval(self, state: RequestState, node: Retrieve, warm_only: bool = False,
                       query: str | None = None) -> None:
        try:
            text = query if query is not None else effects.retrieval_query(node, state.variables)
        except Exception as err:
            return self._fail(state, err)
        rplan = self._plan(state).retrieval(node.id)
        self.next_key += 1
        self.rets[self.next_key] = RetJob(
            key=self.next_key, state=state, node=node, query=text, stepwise=rplan.stepwise,
            order=rplan.order, started=clock(), warm_only=warm_only,
        )
        self.wake.set()
        return None

    def _maybe_warm(self, job: GenJob) -> None:
        """Speculative retrieval: search with the partial text to order the real search's
        clusters (it only feeds the locality history; the real search stays exact)."""
        target = self._plan(job.state).generation(job.node.id).warm_retrieval
        if target is None or job.warmed or job.speculative or job.tokens < self.cfg.warm_after_tokens:
            return
        job.warmed = True
        if any(not r.warm_only for r in self.rets.values()):
            return  # the search side is busy: warming would only delay real retrievals
        node = job.state.graph.node(target)
        variables = dict(job.state.variables)
        variables[job.node.output] = job.text
        try:
            query = effects.retrieval_query(node, variables)
        except Exception:
            return  # the warm query needs values not known yet: nothing to warm
        if query:
            self._new_retrieval(job.state, node, warm_only=True, query=query)

    def _dispatch_search(self) -> None:
        if self.search_future is not None or not self.rets:
            return
        jobs = self._cycle_jobs()
        if not jobs:
            return
        budget = self._budget_ms()
        items = [j.scan_item(self.history.get(j.state.rid, History()),
                             want_partial=self._plan(j.state).retrieval(j.node.id).speculate_into is not None)
                 for j in jobs]
        for j in jobs:
            j.in_flight = True
        loop = asyncio.get_running_loop()
        started = clock()
        self.search_future = loop.run_in_executor(
            None, run_cycle, self.s.search, items, budget, self.cost)
        self.search_future.add_done_callback(lambda _: self.wake.set())
        self._cycle_started = started

    def _cycle_jobs(self) -> list[RetJob]:
        real = [j for j in self.rets.values() if not j.warm_only]
        return real or list(self.rets.values())

    def _budget_ms(self) -> float:
        if self.cfg.budget_ms is not None:
            return self.cfg.budget_ms
        if self.t_r.value is None:
            return float("inf")  # first retrievals: measure t_R on whole searches
        return policies.retrieval_budget_ms(self.beta.value or 0.0, self.t_r.value)

    def _collect_search(self) -> None:
        if self.search_future is None or not self.search_future.done():
            return
        future, self.search_future = self.search_future, None
        try:
            cycle: CycleResult = future.result()
        except Exception as err:  # the whole step failed: fail the requests it carried
            for job in [j for j in self.rets.values() if j.in_flight]:
                self.rets.pop(job.key, None)
                self._fail(job.state, err)
            return
        self._account(cycle)
        for result in cycle.results:
            job = self.rets.get(result.key)
            if job is None or job.state.rid not in self.active:
                self.rets.pop(result.key, None)
                continue
            job.in_flight = False
            if result.error is not None:
                self.rets.pop(job.key)
                if not job.warm_only:
                    self._fail(job.state, result.error)
                continue
            job.absorb(result)
            if result.passages is not None:
                self._complete_retrieval(job, result)
            elif job.partial_passages is not None:
                self._speculate(job)

    def _account(self, cycle: CycleResult) -> None:
        self.n.steps += 1
        self.n.scanned += cycle.vectors_scanned
        self.n.on_acc += cycle.vectors_on_accelerator
        self.n.clusters += sum(len(r.searched) for r in cycle.results)
        overhead_ms = max(cycle.wall_s - cycle.scan_s, 0.0) * 1e3
        self.beta.add(overhead_ms)
        if cycle.predicted_ms > 0:
            self.cost = self.cost.observe(cycle.predicted_ms, cycle.scan_s * 1e3)
        self.s.tracer.add_span("search", f"step x{len(cycle.results)}", self._cycle_started,
                               clock(), clusters=sum(len(r.searched) for r in cycle.results))

    def _complete_retrieval(self, job: RetJob, result) -> None:
        self.rets.pop(job.key)
        state = job.state
        self.history[state.rid] = self.history.get(state.rid, History()).record(
            result.final.ids, job.probe, self.s.search.engine.cluster_of)
        self.t_r.add(self.cost.clusters_ms(job.probe.tolist()))
        if job.warm_only:
            return
        self.s.tracer.add_span(state.rid, f"retrieve {job.node.id}", job.started, clock(),
                               engine=False)
        effects.apply_retrieval(job.node, state.variables, result.passages)
        state.retrievals.append(result.passages)
        self._advance(state)

    def _speculate(self, job: RetJob) -> None:
        """Start the next generation on this retrieval's partial top-k, when the engine has room."""
        target = self._plan(job.state).retrieval(job.node.id).speculate_into
        rid = job.state.rid
        current = self.spec_gens.get(rid)
        if current is not None:
            if job.drift == 0.0:
                return  # the partial top-k did not change: keep the running speculation
            self._drop_speculation(rid)
            self.n.rollbacks += 1
        if job.drift > self.cfg.spec_max_drift:
            return
        load = len(self.gens) + len(self.spec_gens)
        cand = [policies.SpeculationCandidate(rid, job.drift)]
        if not policies.choose_speculation(cand, load, self.cfg.max_generations, self.cfg.tau):
            return
        variables = dict(job.state.variables)
        effects.apply_retrieval(job.node, variables, job.partial_passages)
        try:
            edge = choose_edge(job.state.graph, job.node.id, variables,
                               Counter(job.state.loop_counts))
            if edge.dst != target:
                return
            node = job.state.graph.node(target)
            prompt = effects.generation_prompt(node, variables)
        except Exception:
            return  # the prediction needs values not known yet: no speculation
        self._submit(job.state, node, prompt, speculative=True)
        self.n.speculations += 1
