"""What each unit of a compiled graph does when a request reaches it, and how the engines'
reports complete units.

A unit either completes at once (start, fork, join, verify, commit, finish) or hands work to an
engine's side and waits for a stage of that work (embed-query starts a retrieval job; probe,
cache-lookup and search-steps wait for its stages; prefill starts a generation job and waits
for its first token; decode waits for its end). Each executed unit is a span on the request's
trace track, named `unit <id>`.

One method per unit kind, looked up in the table every executor uses (`passes.interpret`'s
`HANDLERS`: kind -> method name, torch.fx's `Interpreter` shape). The wavefront does not
subclass that interpreter: its units do not run one after another to completion, they hand work
to the engines' sides and complete when a report arrives, across all requests; so each method
here is synchronous and says whether its unit completed at once. Each takes the request's one
object (`live.LiveRequest`), and the engines' reports reach it through the job they name, never
by a lookup of its id. A request that ends is closed here and handed back to the run
(`take_retired`), which reports it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ragraph.errors import failure_kind
from ragraph.ir.nodes import END, START, Generate, Merge, Node, Retrieve
from ragraph.ir.overlap import SpecVerify
from ragraph.ir.stages import (
    EmbedQuery,
    Finish,
    Prefill,
    RetrieveCommit,
    SubStage,
)
from ragraph.passes.interpret import HANDLERS
from ragraph.passes.lower import Program
from ragraph.runtime import effects
from ragraph.runtime.executors.base import Services, clock, fail
from ragraph.runtime.llm.failure import EngineBug
from ragraph.runtime.request import RequestState
from ragraph.runtime.scheduler import fanout
from ragraph.runtime.scheduler.generation_side import GenerationSide
from ragraph.runtime.scheduler.inbox import Generated, Inbox, Token
from ragraph.runtime.scheduler.jobs import Job, RetJob, Stage
from ragraph.runtime.scheduler.live import LiveRequest
from ragraph.runtime.scheduler.lookahead import Lookahead
from ragraph.runtime.scheduler.retrieval_side import RetrievalSide
from ragraph.runtime.scheduler.search_worker import ScanResult

WHOLE = frozenset({"retrieve", "generate"})  # unsplit nodes: a whole chain in one unit


def _waits_for(stage: Stage) -> Callable[..., bool]:
    """A sub-stage that completes when its chain's job reaches `stage`."""

    def wait(self: Units, req: LiveRequest, uid: str, node: SubStage) -> bool:
        return req.jobs[node.origin].wait(uid, stage)

    return wait


log = logging.getLogger(__name__)


def is_bug(err: BaseException) -> bool:
    """A failure whose traceback someone must read: not ragraph's own error, and not an
    engine's bug (the engine logged that where it happened)."""
    return failure_kind(err) == "internal" and not isinstance(err, EngineBug)


class Units:
    """Runs every admitted request's units; a request that ends (answered or failed) is
    retired here and handed back through `take_retired`, for the run to report."""

    def __init__(self, services: Services, config, gen: GenerationSide,  # noqa: ANN001
                 ret: RetrievalSide, inbox: Inbox) -> None:
        self.s, self.cfg, self.gen, self.ret, self.inbox = services, config, gen, ret, inbox
        self.live: dict[str, LiveRequest] = {}  # the admitted requests, by id
        self.retired: list[RequestState] = []  # ended since the run last took them
        self.executed = 0
        self.cache = getattr(services.search.engine, "cache", None)
        self.ahead = Lookahead(services, config, gen, ret, inbox, self.cache)
        # What each unit kind does when a request reaches it: the interpreter's table of unit
        # kinds, each to the method of its name here (synchronous: True when it completed).
        self._handlers: dict[str, Callable[[LiveRequest, str, Any], bool]] = {
            kind: getattr(self, name) for kind, name in HANDLERS.items()}

    # -- walking ---------------------------------------------------------------------------------

    def begin(self, program: Program, state: RequestState) -> None:
        req = LiveRequest.admit(program, state)
        self.live[state.rid] = req
        self._guard(req, self._enter, req, START)

    def take_retired(self) -> list[RequestState]:
        retired, self.retired = self.retired, []
        return retired

    def _enter(self, req: LiveRequest, uid: str) -> None:
        if req.closed:
            return  # the request failed meanwhile
        if uid == END:
            self._close(req)
            return
        req.entered[uid] = clock()
        node = req.program.unit(uid)
        try:
            done = self._handlers[node.kind](req, uid, node)
        except Exception as err:  # this request's error; the others go on
            self._fail(req, err)
            return
        if done:
            self._complete(req, uid)

    def _complete(self, req: LiveRequest, uid: str) -> None:
        if req.closed:
            return
        start, end, node = req.entered.pop(uid, clock()), clock(), req.program.unit(uid)
        self.s.tracer.add_span(req.name, f"unit {uid}", start, end, engine=False, kind=node.kind)
        self.s.hooks.unit_completed(req.state, node, start, end)
        self.executed += 1
        try:
            nxt = req.walk.completed(uid)
        except Exception as err:
            self._fail(req, err)
            return
        for u in nxt:
            self._enter(req, u)

    def _close(self, req: LiveRequest) -> None:
        """Retire: the request's streams are aborted, the sides drop its queued jobs, the
        accelerator tier unpins its clusters, and the object is dropped."""
        del self.live[req.rid]
        self.gen.release(req.close())
        self.ret.release(req)
        if self.cache is not None:
            self.cache.release(req.rid)
        self.retired.append(req.state)

    def cancel(self, rid: str, err: BaseException, logged: bool = False) -> bool:
        """End a running request as failed with `err`; False when it is not running.
        `logged`: the caller has logged `err` already (a bug that touched several requests)."""
        req = self.live.get(rid)
        if req is not None:
            self._fail(req, err, logged)
        return req is not None

    def _fail(self, req: LiveRequest, err: BaseException, logged: bool = False) -> None:
        if not req.closed:
            if not logged and is_bug(err):
                log.error("request %s failed on a bug", req.rid, exc_info=err)
            fail(req.state, err)
            self._close(req)

    def _guard(self, req: LiveRequest, step: Callable[..., object], *args: object) -> None:
        """One request's part of an event: whatever it raises fails that request only."""
        try:
            step(*args)
        except Exception as err:
            self._fail(req, err)

    # -- starting a unit: one method per unit kind, True when it completed at once -------------

    def start(self, req: LiveRequest, uid: str, node: Node) -> bool:
        return True  # start, fork, join: nothing to run

    fork = join = end = start
    probe, cache_lookup = _waits_for(Stage.PROBED), _waits_for(Stage.ORDERED)
    search_steps, decode = _waits_for(Stage.SEARCHED), _waits_for(Stage.DECODED)

    def merge(self, req: LiveRequest, uid: str, node: Merge) -> bool:
        effects.apply_merge(node, req.state.variables)
        req.state.retrievals.extend(effects.retrieved(req.state.variables[node.output]))
        return True

    def embed_query(self, req: LiveRequest, uid: str, node: EmbedQuery) -> bool:
        return self._retrieval(req, node.origin).wait(uid, Stage.EMBEDDED)

    def retrieve(self, req: LiveRequest, uid: str, node: Retrieve) -> bool:
        return self._whole(req, uid, self._retrieval(req, uid), Stage.SEARCHED)

    def _whole(self, req: LiveRequest, uid: str, job: Job | fanout.Fan, stage: Stage) -> bool:
        """An unsplit node waits for its whole chain, then assigns the output itself (at once
        for a map over an empty list)."""
        if not job.wait(uid, stage):
            return False
        req.assign(uid, self.s.hooks)
        return True

    def assign(self, req: LiveRequest, uid: str, node: RetrieveCommit | Finish) -> bool:
        req.assign(node.origin, self.s.hooks)
        return True

    retrieve_commit = finish = assign

    def _retrieval(self, req: LiveRequest, origin: str) -> Job | fanout.Fan:
        chain = req.program.retrievals[origin]
        job = fanout.start_retrievals(self.ret, req, chain) if chain.each else \
            self.ret.start(req, chain, effects.retrieval_query_of(chain.query, req.state.variables))
        req.jobs[origin] = job
        return job

    def prefill(self, req: LiveRequest, uid: str, node: Prefill) -> bool:
        return self._generation(req, node.origin).wait(uid, Stage.PREFILLED)

    def generate(self, req: LiveRequest, uid: str, node: Generate) -> bool:
        return self._whole(req, uid, self._generation(req, uid), Stage.DECODED)

    def _generation(self, req: LiveRequest, origin: str) -> Job | fanout.Fan:
        state, chain = req.state, req.program.generations[origin]
        if chain.each:
            job: Job | fanout.Fan = fanout.start_generations(self.gen, req, chain)
        else:  # the instance its verify point adopted, else a new one
            job = req.jobs.get(origin) or self.gen.start(
                req, chain, effects.generation_prompt_of(chain.prompt, state.variables,
                                                         chain.system, chain.chat),
                effects.prompt_segments(chain.flat_prompt, chain.layout, state.variables))
        req.jobs[origin] = job
        if chain.prefetch is not None:
            self.ahead.prefetch(req, chain)
        return job

    def spec_verify(self, req: LiveRequest, uid: str, node: SpecVerify) -> bool:
        """Speculation's commit point. A generation's instance is adopted when the committed
        prompt equals the one it started with, else rolled back (the prefill that follows then
        starts it afresh); a speculative retrieval only warmed the cluster order, so its
        retrieval always runs from its first step."""
        chain = req.program.generations.get(node.origin)
        if chain is not None:
            prompt = effects.generation_prompt_of(chain.prompt, req.state.variables,
                                                  chain.system, chain.chat)
            adopted = self.gen.verify(req, chain, prompt)
            if adopted is not None:
                req.jobs[chain.origin] = adopted
        return True

    # -- engine reports --------------------------------------------------------------------------

    def _reached(self, job: Job, stage: Stage) -> None:
        uid = job.reach(stage)
        req = job.req
        if uid is None or req.closed:
            return
        try:  # an unsplit node is its chain's last unit too: it assigns the output
            if req.program.unit(uid).kind in WHOLE:
                req.assign(uid, self.s.hooks)
        except Exception as err:
            self._fail(req, err)
            return
        self._complete(req, uid)

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
            self._fail(job.req, error)
            return
        self._reached(job, Stage.PREFILLED)
        self._reached(job, Stage.DECODED)

    def prepared(self, outcomes) -> None:  # noqa: ANN001 - (RetJob, Prepared | error) pairs
        for job, outcome in outcomes:
            self._guard(job.req, self._prepared, job, outcome)

    def _prepared(self, job: RetJob, outcome: object) -> None:
        if isinstance(outcome, BaseException):
            if not job.warm_only:
                self._fail(job.req, outcome)
            return
        for stage in (Stage.EMBEDDED, Stage.PROBED, Stage.ORDERED):
            self._reached(job, stage)

    def searched(self, results: list[tuple[RetJob, ScanResult | BaseException]]) -> None:
        for job, result in results:
            self._guard(job.req, self._searched, job, result)

    def _searched(self, job: RetJob, result: ScanResult | BaseException) -> None:
        if isinstance(result, BaseException):
            if not job.warm_only:
                self._fail(job.req, result)
        elif result.passages is not None and not job.warm_only:
            self._reached(job, Stage.SEARCHED)
        elif result.partial_passages is not None and not job.warm_only:
            self.ahead.speculate(job)
