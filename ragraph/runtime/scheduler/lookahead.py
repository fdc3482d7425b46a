"""What the wavefront starts ahead of need, beside the units that wait for it: a generation on a
retrieval's partial top-k (speculation, adopted only when the committed prompt is identical), a
search on a generation's partial text (speculative retrieval: it only warms the cluster order),
and clusters loaded into the accelerator tier while a generation runs (TeleRAG prefetch)."""

from __future__ import annotations

import asyncio
from collections import Counter

from ragraph.errors import WorkflowError
from ragraph.ir.control import choose_edge
from ragraph.program.program import GenerationChain
from ragraph.runtime import effects
from ragraph.runtime.executors.base import Services, clock
from ragraph.runtime.scheduler import fanout, policies, speculation_rules
from ragraph.runtime.scheduler.generation_side import GenerationSide
from ragraph.runtime.scheduler.inbox import Inbox, PrefetchDone
from ragraph.runtime.scheduler.jobs import GenJob, RetJob
from ragraph.runtime.scheduler.live import LiveRequest
from ragraph.runtime.scheduler.retrieval_side import RetrievalSide


class Lookahead:
    """`cache`: the search engine's accelerator tier, None without one."""

    def __init__(self, services: Services, config, gen: GenerationSide,  # noqa: ANN001
                 ret: RetrievalSide, inbox: Inbox, cache) -> None:  # noqa: ANN001 - HotClusterCache
        self.s, self.cfg, self.gen, self.ret, self.inbox = services, config, gen, ret, inbox
        self.cache = cache

    def speculate(self, job: RetJob[LiveRequest]) -> None:
        """Start the next generation on this retrieval's partial top-k, when the engine has room
        and the request would go there next."""
        req, chain = job.req, job.chain
        if req.finished or chain.speculate_into is None:
            return
        program, state = req.program, req.state
        target = program.generations[chain.speculate_into]
        if target.origin in req.speculative and job.drift == 0.0:
            return  # the partial top-k did not change: keep the running speculation
        self.gen.drop_speculation(req, target.origin)
        if not speculation_rules.speculate_on(job.views, job.drift, self.cfg.spec_max_drift) \
                or not self.gen.has_room() or not self.gen.backoff.allows(job):
            return
        try:
            partial = fanout.speculative_values(program, job, state.variables)
            if partial is None:
                return  # a branch of the map has no partial top-k yet
            variables, after = partial
            edge = choose_edge(program.units[after].successors, after, variables,
                               Counter(state.loop_counts))
            if program.units[edge.dst].origin != target.origin:
                return
            prompt = effects.generation_prompt_of(target.prompt, variables, target.system,
                                                  target.chat)
            segments = effects.prompt_segments(target.flat_prompt, target.layout, variables)
        except (KeyError, WorkflowError):
            return  # the prediction needs values not known yet: no speculation
        self.gen.speculate(req, target, prompt, segments)

    def warm(self, job: GenJob[LiveRequest]) -> None:
        """Speculative retrieval: search with the partial text to order the real search's
        clusters (it only feeds the locality history; the real search stays exact)."""
        req, chain = job.req, job.chain
        if req.finished or chain.warm is None or job.warmed or job.speculative:
            return
        job.warmed = True
        if self.ret.busy_with_real_work or not self.gen.has_room():
            return  # warming would only delay real retrievals or the engine's real work
        target = req.program.retrievals[chain.warm]
        variables = {**job.state.variables, chain.output: job.text}
        try:
            query = effects.retrieval_query_of(target.query, variables)
        except (KeyError, WorkflowError):
            return  # the warm query needs values not known yet: nothing to warm
        if query:
            self.ret.start(req, target, query, warm_only=True)
            self.gen.n.warm_searches += 1

    def prefetch(self, req: LiveRequest, chain: GenerationChain) -> None:
        """TeleRAG lookahead: while a generation that produces a retrieval query runs, load the
        clusters nearest to the text already known, within what the link moves meanwhile."""
        plan = chain.prefetch
        if self.cache is None or plan is None or self.cache.prefetch_room() == 0:
            return  # a full prefetch room would load nothing: do not embed for it
        variables = req.state.variables
        known = "\n".join(str(variables[v]) for v in plan.known if v in variables)
        if not known.strip():
            return
        budget = policies.prefetch_budget_bytes(self.cfg.link_gb_per_s * 1e9,
                                                self.gen.seconds.value or 0.5)
        search, cache, owner, tracer, start = self.s.search, self.cache, req.rid, self.s.tracer, clock()
        track = req.name

        def load() -> None:
            cache.prefetch(search.embed(known), budget, owner)
            # The prefetch unit: off the control path, it runs beside the generation.
            tracer.add_span(track, f"unit {plan.id}", start, clock(), engine=False,
                            kind=plan.kind)

        future = asyncio.get_running_loop().run_in_executor(None, load)
        future.add_done_callback(self.inbox.done_callback(PrefetchDone))

    def prefetched(self, event: PrefetchDone) -> None:
        """A failed prefetch costs only speed (searches still run on the CPU tier): counted."""
        error = None if event.future.cancelled() else event.future.exception()
        if error is not None:
            self.gen.n.prefetch_errors += 1
            self.gen.n.last_prefetch_error = repr(error)
