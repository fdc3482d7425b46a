"""What each unit of a compiled graph does when a request reaches it, and how the engines'
reports complete units.

A unit either completes at once (start, fork, join, verify, commit, finish) or hands work to an
engine's side and waits for a stage of that work (embed-query starts a retrieval job; probe,
cache-lookup and search-steps wait for its stages; prefill starts a generation job and waits
for its first token; decode waits for its end). Each executed unit is a span on the request's
trace track, named `unit <id>`.

What each unit kind does is the interpreter's (`program.interpret.UnitInterpreter`, torch.fx's
`Interpreter` shape: one method per kind, looked up in `HANDLERS`); this is its subclass that
overrides only how engine calls are issued: a chain's first unit hands its work to an engine's
side, the units after it wait for a stage of that work, and the engines' reports complete them
later, across all requests. Each handler takes the request's one object (`live.LiveRequest`)
and returns None when its unit completed at once, else the job it waits on; the engines'
reports reach a request through the job they name, never by a lookup of its id. A request that
ends is retired here from the run's queues (`queues.RequestQueues`), which hand it back to the
run to report.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ragraph.errors import failure_kind
from ragraph.ir.nodes import END, START, Merge
from ragraph.ir.values import Value
from ragraph.program.interpret import UnitInterpreter
from ragraph.program.program import GenerationChain, Program, RetrievalChain, Unit
from ragraph.runtime import effects
from ragraph.runtime.executors.base import Services, clock, fail
from ragraph.runtime.llm.chat import Prompt
from ragraph.runtime.llm.failure import EngineBug
from ragraph.runtime.llm.protocol import PromptSegments
from ragraph.runtime.scheduler import fanout
from ragraph.runtime.scheduler.generation_side import GenerationSide
from ragraph.runtime.scheduler.inbox import Generated, Inbox, Token
from ragraph.runtime.scheduler.jobs import Job, RetJob, Stage, StageWaiter
from ragraph.runtime.scheduler.live import LiveRequest
from ragraph.runtime.scheduler.lookahead import Lookahead
from ragraph.runtime.scheduler.queues import RequestQueues
from ragraph.runtime.scheduler.retrieval_side import RetrievalSide
from ragraph.runtime.scheduler.search_worker import ScanResult

WHOLE = frozenset({"retrieve", "generate"})  # unsplit nodes: a whole chain in one unit
# The stage of its chain's job that each waiting unit kind completes at.
STAGE_OF = {"embed-query": Stage.EMBEDDED, "probe": Stage.PROBED, "cache-lookup": Stage.ORDERED,
            "search-steps": Stage.SEARCHED, "prefill": Stage.PREFILLED, "decode": Stage.DECODED}
Rendered = tuple[Prompt, PromptSegments | None]  # a generation's prompt and its layout


log = logging.getLogger(__name__)


def is_bug(err: BaseException) -> bool:
    """A failure whose traceback someone must read: not ragraph's own error, and not an
    engine's bug (the engine logged that where it happened)."""
    return failure_kind(err) == "internal" and not isinstance(err, EngineBug)


class Units(UnitInterpreter[LiveRequest, Rendered, StageWaiter]):
    """Runs every admitted request's units; a request that ends (answered or failed) is
    retired here from `queues`, which hand it back for the run to report."""

    def __init__(self, services: Services, config, gen: GenerationSide,  # noqa: ANN001
                 ret: RetrievalSide, inbox: Inbox, queues: RequestQueues) -> None:
        self.s, self.cfg, self.gen, self.ret, self.inbox = services, config, gen, ret, inbox
        self.queues = queues
        self.executed = 0
        self.cache = services.search.hot_cache
        self.ahead = Lookahead(services, config, gen, ret, inbox, self.cache)

    # -- walking ---------------------------------------------------------------------------------

    def begin(self, req: LiveRequest, program: Program) -> None:
        """Run an admitted request's units from START, as far as they go at once."""
        req.start(program)
        self._guard(req, self._enter, req, START)

    def _enter(self, req: LiveRequest, uid: str) -> None:
        if req.finished:
            return  # the request failed meanwhile
        if uid == END:
            self._close(req)
            return
        req.entered[uid] = clock()
        unit = req.program.units[uid]
        try:
            waits_on = self.dispatch(unit, req)
        except Exception as err:  # this request's error; the others go on
            self._fail(req, err)
            return
        if waits_on is None:
            self._complete(req, uid)

    def _complete(self, req: LiveRequest, uid: str) -> None:
        if req.finished:
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
        accelerator tier unpins its clusters, and the object is dropped once reported."""
        self.gen.release(self.queues.retire(req))
        self.ret.release(req)
        if self.cache is not None:
            self.cache.release(req.rid)

    def cancel(self, rid: str, err: BaseException, logged: bool = False) -> bool:
        """End a running request as failed with `err`; False when it is not running.
        `logged`: the caller has logged `err` already (a bug that touched several requests)."""
        req = self.queues.running_request(rid)
        if req is not None:
            self._fail(req, err, logged)
        return req is not None

    def _fail(self, req: LiveRequest, err: BaseException, logged: bool = False) -> None:
        if not req.finished:
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

    # -- how engine calls are issued: the interpreter's hooks -------------------------------

    def merge(self, unit: Unit[Merge], req: LiveRequest) -> None:
        super().merge(unit, req)
        req.state.retrievals.extend(effects.retrieved(req.variables[unit.chain.output]))

    def render_prompt(self, chain: GenerationChain, variables: dict[str, Value]) -> Rendered:
        return (effects.generation_prompt_of(chain.prompt, variables, chain.system, chain.chat),
                effects.prompt_segments(chain.flat_prompt, chain.layout, variables))

    def issue_retrieval(self, chain: RetrievalChain, req: LiveRequest,
                        queries: str | list[str]) -> None:
        req.jobs[chain.origin] = (
            _start_retrievals(self.ret, req, chain, queries) if isinstance(queries, list)
            else self.ret.start(req, chain, queries))

    def issue_generation(self, chain: GenerationChain, req: LiveRequest,
                         prompts: Rendered | list[Rendered]) -> None:
        if isinstance(prompts, list):  # a map: one job per branch
            job: Job[LiveRequest] | fanout.Fan = _start_generations(self.gen, req, chain, prompts)
        else:  # the instance its verify point adopted, else a new one
            job = req.jobs.get(chain.origin) or self.gen.start(req, chain, *prompts)
        req.jobs[chain.origin] = job
        if chain.prefetch is not None:
            self.ahead.prefetch(req, chain)

    def wait(self, unit: Unit[Any], req: LiveRequest) -> StageWaiter | None:
        job = req.jobs[unit.origin]
        return None if job.wait(unit.id, STAGE_OF[unit.kind]) else job

    def collect_generation(self, chain: GenerationChain, req: LiveRequest, uid: str,
                           prompts: object) -> StageWaiter | None:
        return self._assign_when(req, uid, chain.origin, Stage.DECODED)

    def collect_retrieval(self, chain: RetrievalChain, req: LiveRequest, uid: str,
                          queries: object) -> StageWaiter | None:
        return self._assign_when(req, uid, chain.origin, Stage.SEARCHED)

    def _assign_when(self, req: LiveRequest, uid: str, origin: str,
                     stage: Stage) -> StageWaiter | None:
        """A chain's last unit assigns its output once the job reached `stage`: at once after
        the units that waited for it; an unsplit node when the report comes (`_reached`), or
        at once for a map over an empty list."""
        job = req.jobs[origin]
        if not job.wait(uid, stage):
            return job
        req.assign(origin, self.s.hooks)
        return None

    def verify(self, unit: Unit[Any], req: LiveRequest) -> None:
        """Speculation's commit point. A generation's instance is adopted when the committed
        prompt equals the one it started with, else rolled back (the prefill that follows then
        starts it afresh); a speculative retrieval only warmed the cluster order, so its
        retrieval always runs from its first step."""
        chain = unit.chain
        if isinstance(chain, GenerationChain):
            prompt = effects.generation_prompt_of(chain.prompt, req.variables,
                                                  chain.system, chain.chat)
            adopted = self.gen.verify(req, chain, prompt)
            if adopted is not None:
                req.jobs[chain.origin] = adopted

    # -- engine reports --------------------------------------------------------------------------

    def _reached(self, job: Job[LiveRequest], stage: Stage) -> None:
        uid = job.reach(stage)
        req = job.req
        if uid is None or req.finished:
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
        if chain.warm and job.tokens % chain.chunk == 0:
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

    def prepared(self, outcomes) -> None:  # noqa: ANN001 - (RetJob, PreparedQuery | error) pairs
        for job, outcome in outcomes:
            self._guard(job.req, self._prepared, job, outcome)

    def _prepared(self, job: RetJob[LiveRequest], outcome: object) -> None:
        if isinstance(outcome, BaseException):
            if not job.warm_only:
                self._fail(job.req, outcome)
            return
        for stage in (Stage.EMBEDDED, Stage.PROBED, Stage.ORDERED):
            self._reached(job, stage)

    def searched(self, results: list[tuple[RetJob[LiveRequest], ScanResult | BaseException]],
                 ) -> None:
        for job, result in results:
            self._guard(job.req, self._searched, job, result)

    def _searched(self, job: RetJob[LiveRequest], result: ScanResult | BaseException) -> None:
        if isinstance(result, BaseException):
            if not job.warm_only:
                self._fail(job.req, result)
        elif result.passages is not None and not job.warm_only:
            self._reached(job, Stage.SEARCHED)
        elif result.partial_passages is not None and not job.warm_only:
            self.ahead.speculate(job)


def _start_retrievals(ret: RetrievalSide, req: LiveRequest, chain: RetrievalChain,
                      queries: list[str]) -> fanout.Fan:
    """One retrieval job per item (its rendered query); the search side batches them like any
    other request's."""
    jobs = []
    for i, query in enumerate(queries):
        job = ret.start(req, chain, query)
        job.branch = i
        jobs.append(job)
    return fanout.Fan(jobs)


def _start_generations(gen: GenerationSide, req: LiveRequest, chain: GenerationChain,
                       rendered: list[Rendered]) -> fanout.Fan:
    """One generation job per item (its rendered prompt and layout), queued for the engine
    together."""
    return fanout.Fan([gen.start(req, chain, prompt, segments, branch=i)
                       for i, (prompt, segments) in enumerate(rendered)])
