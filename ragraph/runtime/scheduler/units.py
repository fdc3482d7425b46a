"""What each unit of a compiled graph does when a request reaches it, and how the engines'
reports complete units.

A unit either completes at once (start, fork, join, verify, commit, finish) or hands work to an
engine's side and waits for a stage of that work (embed-query starts a retrieval job; probe,
cache-lookup and search-steps wait for its stages; prefill starts a generation job and waits
for its first token; decode waits for its end). Each executed unit is a span on the request's
trace track, named `unit <id>`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ragraph.errors import failure_kind
from ragraph.ir.nodes import END, START, Generate, Merge, Node, Retrieve
from ragraph.ir.overlap import Fork, Join, SpecVerify
from ragraph.ir.stages import (
    CacheLookup,
    DecodeChunk,
    EmbedQuery,
    Finish,
    Prefill,
    Probe,
    RetrieveCommit,
    SearchSteps,
)
from ragraph.runtime import effects
from ragraph.runtime.executors.base import Services, clock, fail
from ragraph.runtime.generate import generated_text
from ragraph.runtime.llm.failure import EngineBug
from ragraph.runtime.request import RequestState
from ragraph.runtime.scheduler import fanout
from ragraph.runtime.scheduler.generation_side import GenerationSide
from ragraph.runtime.scheduler.inbox import Generated, Inbox, Token
from ragraph.runtime.scheduler.jobs import GenJob, Job, RetJob, Stage
from ragraph.runtime.scheduler.lookahead import Lookahead
from ragraph.runtime.scheduler.program import GenerationChain, Program, RetrievalChain
from ragraph.runtime.scheduler.retrieval_side import RetrievalSide
from ragraph.runtime.scheduler.search_worker import ScanResult
from ragraph.runtime.scheduler.walk import Walk

# The stage of its chain's job a waiting unit completes on.
WAITS_FOR: dict[type, Stage] = {Probe: Stage.PROBED, CacheLookup: Stage.ORDERED,
                                SearchSteps: Stage.SEARCHED, Retrieve: Stage.SEARCHED,
                                DecodeChunk: Stage.DECODED, Generate: Stage.DECODED}
INSTANT = (Fork, Join)

log = logging.getLogger(__name__)


def is_bug(err: BaseException) -> bool:
    """A failure whose traceback someone must read: not ragraph's own error, and not an
    engine's bug (the engine logged that where it happened)."""
    return failure_kind(err) == "internal" and not isinstance(err, EngineBug)


class Units:
    def __init__(self, services: Services, config, gen: GenerationSide, ret: RetrievalSide,
                 inbox: Inbox, retire: Callable[[RequestState], None],
                 has_room: Callable[[], bool]) -> None:
        self.s, self.cfg, self.gen, self.ret, self.inbox = services, config, gen, ret, inbox
        self._retire, self._has_room = retire, has_room
        self.walks: dict[str, Walk] = {}
        self.rjobs: dict[tuple[str, str], RetJob | fanout.Fan] = {}  # each chain's retrieval
        self.gjobs: dict[int, GenJob] = {}  # generation jobs units wait on, by key
        self.gfans: dict[tuple[str, str], fanout.Fan] = {}  # a mapped generation's branches
        self.entered: dict[tuple[str, str], float] = {}
        self.executed = 0
        self.cache = getattr(services.search.engine, "cache", None)
        self.ahead = Lookahead(services, config, gen, ret, inbox, has_room, self.walks,
                               self.cache)

    # -- walking ---------------------------------------------------------------------------------

    def begin(self, program: Program, state: RequestState) -> None:
        walk = Walk(program, state)
        self.walks[state.rid] = walk
        self._guard(state, self._enter, walk, START)

    def _enter(self, walk: Walk, uid: str) -> None:
        if walk.state.rid not in self.walks:
            return  # the request failed meanwhile
        if uid == END:
            self._close(walk)
            return
        self.entered[(walk.state.rid, uid)] = clock()
        node = walk.program.unit(uid)
        try:
            done = self._start(walk, uid, node)
        except Exception as err:  # this request's error; the others go on
            self._fail(walk.state, err)
            return
        if done:
            self._complete(walk, uid)

    def _complete(self, walk: Walk, uid: str) -> None:
        rid = walk.state.rid
        if rid not in self.walks:
            return
        start, end, node = self.entered.pop((rid, uid), clock()), clock(), walk.program.unit(uid)
        self.s.tracer.add_span(walk.state.name, f"unit {uid}", start, end, engine=False,
                               kind=node.kind)
        self.s.hooks.unit_completed(walk.state, node, start, end)
        self.executed += 1
        try:
            nxt = walk.completed(uid)
        except Exception as err:
            self._fail(walk.state, err)
            return
        for u in nxt:
            self._enter(walk, u)

    def _close(self, walk: Walk) -> None:
        self.walks.pop(walk.state.rid, None)
        self._forget(walk.state.rid)
        self._retire(walk.state)

    def cancel(self, rid: str, err: BaseException, logged: bool = False) -> bool:
        """End a running request as failed with `err`; False when it is not running.
        `logged`: the caller has logged `err` already (a bug that touched several requests)."""
        walk = self.walks.get(rid)
        if walk is not None:
            self._fail(walk.state, err, logged)
        return walk is not None

    def _fail(self, state: RequestState, err: BaseException, logged: bool = False) -> None:
        if state.rid in self.walks:
            if not logged and is_bug(err):
                log.error("request %s failed on a bug", state.rid, exc_info=err)
            fail(state, err)
            self._close(self.walks[state.rid])

    def _guard(self, state: RequestState, step: Callable[..., object], *args: object) -> None:
        """One request's part of an event: whatever it raises fails that request only."""
        try:
            step(*args)
        except Exception as err:
            self._fail(state, err)

    def _forget(self, rid: str) -> None:
        for key in [k for k in self.rjobs if k[0] == rid]:
            del self.rjobs[key]
        for key in [k for k, j in self.gjobs.items() if j.state.rid == rid]:
            del self.gjobs[key]
        for fan in [k for k in self.gfans if k[0] == rid]:
            del self.gfans[fan]
        self.entered = {k: v for k, v in self.entered.items() if k[0] != rid}
        if self.cache is not None:
            self.cache.release(rid)

    # -- starting a unit -------------------------------------------------------------------------

    def _start(self, walk: Walk, uid: str, node: Node) -> bool:
        """Start `node`; True when it completed at once."""
        state, program = walk.state, walk.program
        if isinstance(node, INSTANT) or node.kind == "start":
            return True
        if isinstance(node, Merge):
            effects.apply_merge(node, state.variables)
            state.retrievals.extend(effects.retrieved(state.variables[node.output]))
            return True
        if isinstance(node, SpecVerify):
            return self._verify(walk, node)
        if isinstance(node, EmbedQuery | Retrieve):
            chain = program.retrievals[program.origin(uid)]
            job = fanout.start_retrievals(self.ret, state, chain) if chain.each else \
                self.ret.start(state, chain, effects.retrieval_query_of(chain.query,
                                                                        state.variables))
            self.rjobs[(state.rid, chain.origin)] = job
            if isinstance(node, Retrieve) and job.wait(uid, Stage.SEARCHED):
                self._commit(state, chain)  # a map over an empty list: nothing to search
                return True
            return job.wait(uid, WAITS_FOR.get(type(node), Stage.EMBEDDED))
        if isinstance(node, Prefill | Generate):
            return self._start_generation(walk, uid, node)
        if isinstance(node, RetrieveCommit):
            self._commit(state, program.retrievals[node.origin])
            return True
        if isinstance(node, Finish):
            self._finish(state, program.generations[node.origin])
            return True
        job = self._job_of(walk, uid)
        return job.wait(uid, WAITS_FOR[type(node)])

    def _job_of(self, walk: Walk, uid: str) -> Job:
        origin, rid = walk.program.origin(uid), walk.state.rid
        if origin in walk.program.retrievals:
            return self.rjobs[(rid, origin)]
        return self.gfans.get((rid, origin)) or self.gen.real[(rid, origin, 0)]

    def _start_generation(self, walk: Walk, uid: str, node: Prefill | Generate) -> bool:
        state, program = walk.state, walk.program
        chain = program.generations[program.origin(uid)]
        if chain.each:
            job: GenJob | fanout.Fan = fanout.start_generations(self.gen, state, chain)
            self.gfans[(state.rid, chain.origin)] = job
            self.gjobs.update((j.key, j) for j in job.jobs)  # type: ignore[misc]
        else:
            prompt = effects.generation_prompt_of(chain.prompt, state.variables, chain.system,
                                                  chain.chat)
            segments = effects.prompt_segments(chain.flat_prompt, chain.layout, state.variables)
            job = self.gen.start(state, chain, prompt, segments)
            self.gjobs[job.key] = job
        if chain.prefetch is not None:
            self.ahead.prefetch(state, chain)
        if isinstance(node, Generate) and job.wait(uid, Stage.DECODED):
            self._finish(state, chain)  # a map over an empty list: nothing to generate
            return True
        return job.wait(uid, Stage.DECODED if isinstance(node, Generate) else Stage.PREFILLED)

    def _verify(self, walk: Walk, node: SpecVerify) -> bool:
        """Speculation's commit point. A generation's instance is adopted when the committed
        prompt equals the one it started with, else rolled back (the prefill that follows then
        starts it afresh); a speculative retrieval only warmed the cluster order, so its
        retrieval always runs from its first step."""
        chain = walk.program.generations.get(node.origin)
        if chain is not None:
            prompt = effects.generation_prompt_of(chain.prompt, walk.state.variables,
                                                  chain.system, chain.chat)
            self.gen.verify(walk.state, chain, prompt)
        return True

    def _commit(self, state: RequestState, chain: RetrievalChain) -> None:
        self._apply_retrieval(state, chain, self.rjobs.pop((state.rid, chain.origin)))

    def _apply_retrieval(self, state: RequestState, chain: RetrievalChain,
                         job: RetJob | fanout.Fan) -> None:
        passages = job.passages
        assert passages is not None  # the search-steps unit completed
        if isinstance(job, RetJob):
            self.s.hooks.retrieved(state.rid, chain.origin, job.searched)
        effects.apply_retrieval_to(chain.output, state.variables, passages)
        state.retrievals.extend(effects.retrieved(passages))

    def _finish(self, state: RequestState, chain: GenerationChain) -> None:
        fan = self.gfans.pop((state.rid, chain.origin), None)
        if fan is not None:
            for done in fanout.finish_generations(self.gen, fan, state, chain):
                self.gjobs.pop(done.key, None)
                self.s.hooks.generated(state.rid, chain.origin, done.result, done.prompt)
            return
        job = self.gen.real[(state.rid, chain.origin, 0)]
        self.gjobs.pop(job.key, None)
        self.gen.finished(job)
        error = job.failure()
        if error is not None:
            raise error
        assert job.result is not None  # the decode unit completed
        text = generated_text(job.result)  # raises the engine's error for this request
        self.s.hooks.generated(state.rid, chain.origin, job.result, job.prompt)
        effects.apply_generation_to(chain.output, chain.append, state.variables, text,
                                    text.min_prob, chain.items)

    # -- engine reports --------------------------------------------------------------------------

    def _reached(self, job: Job, stage: Stage) -> None:
        uid = job.reach(stage)
        walk = self.walks.get(job.state.rid)
        if uid is None or walk is None:
            return
        node = walk.program.unit(uid)
        try:
            if isinstance(node, Retrieve):
                done = self.rjobs.pop((job.state.rid, node.id), job)
                self._apply_retrieval(job.state, walk.program.retrievals[node.id],
                                      done)  # type: ignore[arg-type]
            elif isinstance(node, Generate):
                self._finish(job.state, walk.program.generations[node.id])
        except Exception as err:
            self._fail(job.state, err)
            return
        self._complete(walk, uid)

    def token(self, event: Token) -> None:
        job = self.gen.token(event)
        if job is None:
            return
        if job.tokens == 1:
            self._reached(job, Stage.PREFILLED)
        chain = job.chain
        if chain is not None and chain.warm and job.tokens % chain.chunk == 0:
            self.ahead.warm(job)  # a decode repetition ended: speculative retrieval may start

    def generated(self, event: Generated) -> None:
        job = self.gen.ended(event)
        if job is None:
            return
        error = job.failure()  # a speculative job that failed never gets here (ended)
        if error is not None:
            self._fail(job.state, error)
            return
        self._reached(job, Stage.PREFILLED)
        self._reached(job, Stage.DECODED)

    def prepared(self, outcomes) -> None:  # noqa: ANN001 - (RetJob, Prepared | error) pairs
        for job, outcome in outcomes:
            self._guard(job.state, self._prepared, job, outcome)

    def _prepared(self, job: RetJob, outcome: object) -> None:
        if isinstance(outcome, BaseException):
            if not job.warm_only:
                self._fail(job.state, outcome)
            return
        for stage in (Stage.EMBEDDED, Stage.PROBED, Stage.ORDERED):
            self._reached(job, stage)

    def searched(self, results: list[tuple[RetJob, ScanResult | BaseException]]) -> None:
        for job, result in results:
            self._guard(job.state, self._searched, job, result)

    def _searched(self, job: RetJob, result: ScanResult | BaseException) -> None:
        if isinstance(result, BaseException):
            if not job.warm_only:
                self._fail(job.state, result)
        elif result.passages is not None and not job.warm_only:
            self._reached(job, Stage.SEARCHED)
        elif result.partial_passages is not None and not job.warm_only:
            self.ahead.speculate(job)
