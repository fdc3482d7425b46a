"""The wavefront scheduler (HedraRAG): every cycle, the ready sub-stages of all requests go to both
engines at once — a budgeted batch of cluster searches to the search thread, generations to the LLM
engine — and the requests advance as results come back.

    admit → start generations → dispatch a search step → wait → collect (speculate) → advance

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

from ragraph.errors import ConfigError
from ragraph.ir.control import choose_edge
from ragraph.ir.nodes import END, Generate, Retrieve
from ragraph.runtime import effects
from ragraph.runtime.catalog import Catalog
from ragraph.runtime.executors.base import (
    OnDone,
    Services,
    admit,
    advance,
    clock,
    describe_failure,
    finish,
)
from ragraph.runtime.outcome import RunStats
from ragraph.runtime.request import Request, RequestState
from ragraph.runtime.retrieval.cost import calibrated
from ragraph.runtime.scheduler import policies
from ragraph.runtime.scheduler.generation_side import Counters, GenerationHooks, GenerationSide
from ragraph.runtime.scheduler.jobs import GenJob, RetJob
from ragraph.runtime.scheduler.plan import ExecutionPlan
from ragraph.runtime.scheduler.retrieval_side import RetrievalSide


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
        for name in ("max_active", "max_generations", "warm_after_tokens"):
            if getattr(self, name) < 1:
                raise ConfigError(name, f"must be >= 1, got {getattr(self, name)}")
        if not 0 < self.tau <= 1:
            raise ConfigError("tau", f"must be in (0, 1], got {self.tau}")


@dataclass
class WavefrontExecutor:
    name: ClassVar[str] = "ragraph"
    services: Services
    passes: str = "-O2"
    config: SchedulerConfig = field(default_factory=SchedulerConfig)

    async def run(self, catalog: Catalog, arrivals: AsyncIterator[Request], on_done: OnDone) -> RunStats:
        loop = asyncio.get_running_loop()
        cost = await loop.run_in_executor(None, calibrated, self.services.search.engine)
        run = _Run(self.services, catalog.compiled(self.passes), self.config, on_done, cost)
        return await run.main(arrivals)


class _Run:
    """State of one scheduler run (one instance per `run` call: no state leaks across runs)."""

    def __init__(self, services: Services, catalog: Catalog, config: SchedulerConfig,
                 on_done: OnDone, cost) -> None:
        self.s, self.catalog, self.cfg, self.on_done = services, catalog, config, on_done
        self.inbox: list[tuple[Request, float]] = []
        self.active: dict[str, RequestState] = {}
        self.wake = asyncio.Event()
        self.arrivals_done = False
        self.n = Counters()
        hooks = GenerationHooks(finished=self._generated, failed=self._fail,
                                started=self._prefetch, streamed=self._maybe_warm)
        self.gen = GenerationSide(services, config.max_generations, self.n, hooks)
        self.ret = RetrievalSide(services, cost, self.n, self._plan, config.initial_beta_ms,
                                 config.budget_ms, self.wake.set, self._engine_has_room)
        # The accelerator tier, when the search engine has one (TieredEngine).
        self.cache = getattr(services.search.engine, "cache", None)
        self.engine_busy = policies.BusyMeter()

    async def main(self, arrivals: AsyncIterator[Request]) -> RunStats:
        feeder = asyncio.create_task(self._feed(arrivals))
        try:
            while not (self.arrivals_done and not self.inbox and not self.active):
                self._admit()
                self.gen.start_ready()
                self.ret.dispatch()
                await self.wake.wait()
                self.wake.clear()
                self._collect()
            await feeder
            if self.ret.future is not None:  # a warm-only step still running: let it end
                await asyncio.wait([self.ret.future])
        finally:
            self.ret.close()
        return self._stats()

    async def _feed(self, arrivals: AsyncIterator[Request]) -> None:
        async for request in arrivals:
            self.inbox.append((request, clock()))
            self.wake.set()
        self.arrivals_done = True
        self.wake.set()

    def _admit(self) -> None:
        while self.inbox and len(self.active) < self.cfg.max_active:
            request, arrived = self.inbox.pop(0)
            state = admit(self.catalog, request, arrived)
            if state.error is not None:
                finish(state, self.on_done, clock())
                continue
            self.active[state.rid] = state
            self.gen.admit(state)
            self._advance(state)

    def _advance(self, state: RequestState) -> None:
        """Follow the control edge to the next node; queue its work or finish the request."""
        try:
            nxt = advance(state)
        except Exception as err:
            return self._fail(state, err)
        if nxt == END:
            return self._retire(state)
        node = state.graph.node(nxt)
        if isinstance(node, Generate):
            self.gen.ready.append(state)  # a speculative instance is checked when it starts
            return None
        self.gen.drop_speculation(state.rid)  # the request did not go where it speculated
        if isinstance(node, Retrieve):
            try:
                self.ret.start(state, node, effects.retrieval_query(node, state.variables))
            except Exception as err:
                return self._fail(state, err)
        self.wake.set()
        return None

    def _generated(self, state: RequestState) -> None:
        self._advance(state)
        self.wake.set()

    def _fail(self, state: RequestState, err: BaseException) -> None:
        state.error = describe_failure(err)
        self._retire(state)

    def _retire(self, state: RequestState) -> None:
        """The request is done (answered or failed): release everything it holds."""
        self.gen.release(state.rid)
        self.ret.release(state)
        if self.cache is not None:
            self.cache.release(state.rid)
        self.active.pop(state.rid, None)
        finish(state, self.on_done, clock())

    def _plan(self, state: RequestState) -> ExecutionPlan:
        return self.catalog.plan_for(state.graph)

    def _collect(self) -> None:
        for job, result in self.ret.collect(lambda s: s.rid in self.active):
            if isinstance(result, BaseException):
                if not job.warm_only:
                    self._fail(job.state, result)
            elif result.passages is not None and not job.warm_only:
                effects.apply_retrieval(job.node, job.state.variables, result.passages)
                job.state.retrievals.append(result.passages)
                self._advance(job.state)
            elif result.partial_passages is not None:
                self._speculate(job)

    def _engine_has_room(self) -> bool:
        """Room for speculation: the engine is not the bottleneck and its generation stage is
        under-utilized (T_curr/T_max < τ)."""
        share = self.engine_busy.sample(self.s.llm.counters().busy_s, clock())
        if policies.engine_is_bottleneck(share, self.cfg.tau):
            return False
        return policies.has_spare_capacity(self.gen.load, self.cfg.max_generations, self.cfg.tau)

    def _speculate(self, job: RetJob) -> None:
        """Start the next generation on this retrieval's partial top-k, when the engine has room."""
        target = self._plan(job.state).retrieval(job.node.id).speculate_into
        rid = job.state.rid
        if rid in self.gen.speculative:
            if job.drift == 0.0:
                return  # the partial top-k did not change: keep the running speculation
            self.gen.drop_speculation(rid)
        if target is None or job.drift > self.cfg.spec_max_drift or not self._engine_has_room():
            return
        cand = [policies.SpeculationCandidate(rid, job.drift)]
        if not policies.choose_speculation(cand, self.gen.load, self.cfg.max_generations,
                                           self.cfg.tau):
            return
        variables = dict(job.state.variables)
        effects.apply_retrieval(job.node, variables, job.partial_passages)
        try:
            edge = choose_edge(job.state.graph, job.node.id, variables,
                               Counter(job.state.loop_counts))
            node = job.state.graph.node(edge.dst)
            if edge.dst != target or not isinstance(node, Generate):
                return
            prompt = effects.generation_prompt(node, variables)
        except Exception:
            return  # the prediction needs values not known yet: no speculation
        try:
            self.gen.submit(job.state, node, prompt, speculative=True)
        except Exception:
            return  # a refused speculation costs nothing: the real generation reports errors

    def _maybe_warm(self, job: GenJob) -> None:
        """Speculative retrieval: search with the partial text to order the real search's
        clusters (it only feeds the locality history; the real search stays exact)."""
        target = self._plan(job.state).generation(job.node.id).warm_retrieval
        if target is None or job.warmed or job.speculative or job.tokens < self.cfg.warm_after_tokens:
            return
        job.warmed = True
        if self.ret.busy_with_real_work or not self._engine_has_room():
            return  # warming would only delay real retrievals or the engine's real work
        node = job.state.graph.node(target)
        variables = {**job.state.variables, job.node.output: job.text}
        try:
            query = effects.retrieval_query(node, variables)
        except Exception:
            return  # the warm query needs values not known yet: nothing to warm
        if query:
            self.ret.start(job.state, node, query, warm_only=True)
            self.wake.set()

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
        budget = policies.prefetch_budget_bytes(self.cfg.link_bytes_per_s,
                                                self.gen.seconds.value or 0.5)
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

    def _stats(self) -> RunStats:
        n = self.n
        return RunStats(
            speculations=n.speculations, speculation_hits=n.hits, rollbacks=n.rollbacks,
            clusters_searched=n.clusters, search_steps=n.steps, vectors_scanned=n.scanned,
            vectors_on_accelerator=n.on_acc,
            extra={"beta_ms": self.ret.beta.value or 0.0, "t_r_ms": self.ret.t_r.value or 0.0,
                   "prefetch_errors": float(n.prefetch_errors)},
        )
