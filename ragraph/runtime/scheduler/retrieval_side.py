"""The retrieval side of the wavefront: pending retrievals of all requests, advanced one budgeted
search cycle at a time on the search thread (sub-stage budget mb = sqrt(2·β·t_R)), each keeping
the request's locality history for the similarity-aware cluster order. New queries are embedded
in batches and probed on the same search thread, between cycles: embedding and scanning each get
every search core in turn instead of fighting over them."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable

import numpy as np

from ragraph.program.program import RetrievalChain
from ragraph.runtime.executors.base import Services, clock
from ragraph.runtime.outcome import RunStats
from ragraph.runtime.retrieval.ivf.cost import SearchCostModel
from ragraph.runtime.scheduler import policies
from ragraph.runtime.scheduler.backoff import SpeculationBackoff
from ragraph.runtime.scheduler.fanout import count_shared
from ragraph.runtime.scheduler.inbox import Inbox, PrepareDone, Retrieved, StepDone
from ragraph.runtime.scheduler.jobs import RetJob
from ragraph.runtime.scheduler.live import LiveRequest
from ragraph.runtime.scheduler.search_worker import (
    CycleResult,
    PreparedQuery,
    Query,
    Release,
    ScanResult,
    SplitCheck,
    prepare,
    run_cycle,
)
from ragraph.runtime.threads import search_pool

# New queries gather until this many wait (or the search is down to its last step) before they are
# embedded: where a CPU embedder's cost per query stops falling with the batch (figures:
# docs/benchmarks/code-figures.md#search-thread).
EMBED_BATCH = 16
# The queries waiting when the search thread frees up are embedded in one batch ahead of the next
# step, which then carries them all beside the retrievals under way: a list-major step reads each
# list once for every query probing it, so one step of many queries scans faster than several
# small ones. A batch grows past EMBED_BATCH while it embeds within the time one retrieval takes
# to search (a longer embedding holds the retrievals under way back and costs throughput), and to
# as many queries as make its step list-major (`policies.list_major_batch`): on a large index
# small steps share no list and are scanned query by query (figures:
# docs/benchmarks/code-figures.md#search-thread).
MAX_EMBED_BATCH = 64


class RetrievalSide:
    def __init__(self, services: Services, cost: SearchCostModel, counters: RunStats, inbox: Inbox,
                 initial_beta_ms: float, budget_ms: float | None,
                 may_speculate: Callable[[], bool], backoff: SpeculationBackoff,
                 feed_cap: Callable[[int, float | None, float | None], int | None] =
                 lambda _last, _query, _search: None,
                 release: str = "step",
                 engine_share: Callable[[], float | None] = lambda: None,
                 engine_alone: bool = False) -> None:
        self.s, self.cost, self.n, self.inbox = services, cost, counters, inbox
        # Partial top-k passages are looked up only while a speculation could start on them.
        self.may_speculate = may_speculate
        # ... and only for the retrievals speculation's backoff allows (`SpeculationBackoff`).
        self.backoff = backoff
        # The cap on a batch that the LLM engine would wait on (`GenerationSide.feed_cap`).
        self.feed_cap = feed_cap
        # When prompts go to the engine (`policies.stream_prompts`), from the search thread's
        # measured busy share.
        self.release_rule, self.engine_share = release, engine_share
        # The LLM engine batches on its own: a step's retrievals that start generations go to
        # the loop as they complete within it (`search_worker.Release`).
        self.engine_alone = engine_alone
        self._early: dict[int, RetJob] = {}  # jobs the running cycle released before its end
        self.busy_s = 0.0  # seconds the search thread spent embedding and searching
        self.busy = policies.BusyMeter()
        self._last_batch = 0  # queries in the last embedding batch
        self.jobs: dict[int, RetJob] = {}
        # New queries wait here while a batch is being embedded, then go as the next batch.
        self.to_prepare: list[RetJob] = []
        self.preparing: asyncio.Future | None = None
        # Embedding batches and search cycles take turns on one thread, each on every search
        # core: side by side they slowed each other (docs/benchmarks/code-figures.md).
        self.worker = search_pool(services.search_threads, "ragraph-search")
        self.future: asyncio.Future | None = None
        self.beta = policies.RunningMean(value=initial_beta_ms)
        self.t_r = policies.RunningMean()
        self.embed_ms = policies.RunningMean()  # embedding (and probing), per query
        self.fixed_budget_ms = budget_ms
        self._next_key = 0
        self._cycle_started = 0.0
        self._stepped_last = True  # which of the two went last on the search thread
        self._may_join = True  # no batch has joined the next step yet
        # The accelerator tier's clusters as the running cycle began (spans count a retrieval's
        # hits in it); None when spans are off or there is no tier.
        self._resident = None

    @property
    def busy_with_real_work(self) -> bool:
        return any(not j.warm_only for j in self.jobs.values())

    def start(self, req: LiveRequest, chain: RetrievalChain, query: str,
              warm_only: bool = False) -> RetJob:
        self._next_key += 1
        job = RetJob(key=self._next_key, req=req, started=clock(), chain=chain, query=query,
                     warm_only=warm_only)
        self.jobs[job.key] = job
        self.to_prepare.append(job)
        return job

    def _start_preparing(self, backlog_ms: float, size: int | None = None) -> bool:
        """Embed the queries that arrived since the last batch, in one batch, once a full batch
        has gathered or the search is down to its last step: embedding waits its turn on the
        search thread anyway, and a query embedded alone costs several in a batch (measured:
        docs/benchmarks/code-figures.md#search-thread). A batch the LLM engine would wait on
        is capped (`policies.feed_batch`).
        `size`: this many now, whatever has gathered (queries joining the next step)."""
        if not self.to_prepare:
            return False
        if size is None and self.streams():  # every query waiting, none gathering
            size = MAX_EMBED_BATCH
        if size is None:
            if len(self.to_prepare) < self._least_batch() and \
                    backlog_ms > self._budget_ms(backlog_ms):
                return False
            cap = self._feed_cap()
            size = self._batch_size() if cap is None else min(self._batch_size(), cap)
        jobs, self.to_prepare = self.to_prepare[:size], self.to_prepare[size:]
        self._last_batch = len(jobs)
        queries = [Query(j.query, j.chain.nprobe, j.chain.order, j.req.history) for j in jobs]
        self.preparing = asyncio.get_running_loop().run_in_executor(
            self.worker, timed, prepare, self.s.search, queries, self.s.search_threads)
        keys = tuple(j.key for j in jobs)
        self.preparing.add_done_callback(self.inbox.done_callback(lambda f: PrepareDone(keys, f)))
        self._stepped_last = False
        return True

    def _feed_cap(self, drain: bool = True) -> int | None:
        """The engine's cap on the next batch where the waiting retrievals start generations;
        `drain` False: only the cap of its first batches (`policies.feed_batch`)."""
        if not any(j.chain.feeds_generation for j in self.to_prepare):
            return None
        if not drain:
            return self.feed_cap(self._last_batch, None, None)
        return self.feed_cap(self._last_batch, self.embed_ms.value, self.t_r.value)

    def streams(self) -> bool:
        """Whether prompts go to the engine as their retrievals finish
        (`policies.stream_prompts`): the queries waiting are embedded as soon as the search
        thread is free, none gathering into a batch, and searched whole."""
        share = self.busy.sample(self.busy_s, clock())
        return policies.stream_prompts(self.release_rule, self.engine_share(), share)

    def _batch_size(self) -> int:
        return policies.embed_batch_size(self.embed_ms.value, self.t_r.value,
                                         self._least_batch(), MAX_EMBED_BATCH)

    def _least_batch(self) -> int:
        """EMBED_BATCH, or the queries that make a step list-major where that takes more."""
        search = self.s.search
        rule = search.list_rule
        waiting = self.to_prepare[0].chain if self.to_prepare else None
        nprobe = (waiting.nprobe if waiting is not None else None) or self.s.search.nprobe
        shared = policies.list_major_batch(None if rule is None else rule.min_sharing,
                                           search.nlist, nprobe)
        return min(max(EMBED_BATCH, shared), MAX_EMBED_BATCH)

    def _backlog_ms(self) -> float:
        """Predicted scan time of the embedded retrievals not finished yet (at the mean cluster
        cost: this runs every scheduler cycle)."""
        clusters = sum(len(j.remaining) for j in self.jobs.values()
                       if j.vector is not None and not j.warm_only)
        return clusters * self.cost.mean_cluster_ms

    def prepared(self, event: PrepareDone) -> list[tuple[RetJob, PreparedQuery | BaseException]]:
        """A batch was embedded and probed: each job of a request still running, with its
        outcome (a query that failed to embed fails only its own request)."""
        self.preparing = None
        if event.future.cancelled():  # the run is closing
            return []
        error, seconds = event.future.exception(), 0.0
        if error is None:
            outcomes, seconds = event.future.result()
            self.busy_s += seconds
            self.embed_ms.add(seconds * 1e3 / max(len(event.keys), 1))
        else:
            outcomes = [error] * len(event.keys)
        out = []
        for key, outcome in zip(event.keys, outcomes, strict=True):
            job = self.jobs.get(key)
            if job is None:
                continue  # the request finished meanwhile
            if isinstance(outcome, BaseException):
                self.jobs.pop(key)
            else:
                job.take(outcome)
                job.embedded_at, job.embedding_s = clock(), seconds
            out.append((job, outcome))
        return out

    def close(self) -> None:
        self.worker.shutdown(wait=True, cancel_futures=True)

    def release(self, req: LiveRequest) -> None:
        """A request retired: drop its queued jobs (results of jobs in flight are dropped when
        they come back)."""
        for key in [k for k, j in self.jobs.items() if j.req is req]:
            self.jobs.pop(key)
        self.to_prepare = [j for j in self.to_prepare if j.req is not req]

    def dispatch(self) -> None:
        """Give the search thread its next piece of work when it has none: embedding batches
        and search cycles take turns (a cycle after a batch carries the batch's queries; a batch
        after a cycle takes the queries that gathered meanwhile), and either goes alone when
        the other has nothing to do."""
        if self.future is not None or self.preparing is not None:
            return
        backlog = self._backlog_ms()
        if self._stepped_last and self._start_preparing(backlog):
            return
        if self._may_join and self._feed_cap(drain=False) is None and self._join_next_step():
            self._may_join = False
            self._start_preparing(backlog, size=min(len(self.to_prepare), MAX_EMBED_BATCH))
            return
        if not self._start_cycle(backlog):
            self._start_preparing(backlog)

    def _join_next_step(self) -> bool:
        """Whether the waiting queries embed cheaply enough to join the step about to start
        (policies.join_before_step); once per step, so arrivals cannot hold a step back, and
        never while the engine is fed its first batches (such a batch's step goes alone).
        A batch capped by the engine's drain may be joined: queries join only where they
        embed in less than the step scans, so the step grows where it shares its lists (kept
        out, IRG at nprobe 256 lost a sixth of its throughput: docs/benchmarks/seeds.md)."""
        ready = [j for j in self.jobs.values() if j.ready and not j.warm_only]
        if not self.to_prepare or not ready:
            return False
        step = self.cost.step_ms(np.fromiter((c for j in ready for c in j.remaining), np.int64))
        return policies.join_before_step(self.embed_ms.value, len(self.to_prepare), step)

    def _start_cycle(self, backlog: float) -> bool:
        ready = [j for j in self.jobs.values() if j.ready]
        jobs = [j for j in ready if not j.warm_only] or ready
        if not jobs:
            return False
        if self.t_r.value is None:
            # Until one finishes, t_R is what the calibrated cost model predicts for these
            # retrievals: whole searches in the first step held 64 retrievals for 0.8 s.
            self.t_r.add(sum(self.cost.clusters_ms(j.remaining) for j in jobs) / len(jobs))
        spare = self.may_speculate()
        items = [j.scan_item(spare and j.may_speculate and self.backoff.allows(j)) for j in jobs]
        for j in jobs:
            j.in_flight = True
        self._cycle_started = clock()
        if self.s.hooks.recording:
            tier = self.s.search.hot_cache
            self._resident = tier.resident if tier is not None else None
        self.future = asyncio.get_running_loop().run_in_executor(
            self.worker, run_cycle, self.s.search, items,
            self._budget_ms(backlog, jobs, any(i.want_partial for i in items)),
            self.cost, self._split_check(), self._release(jobs))
        self.future.add_done_callback(self.inbox.done_callback(StepDone))
        self._stepped_last = True
        self._may_join = True
        return True

    def _release(self, jobs: list[RetJob]) -> Release | None:
        """Early release where it may pay: the engine batches on its own, so prompts that reach
        it as their retrievals complete ride in its decode steps, where a step's prompts
        together prefill in one pass that decoding waits out; and the retrievals start
        generations. Elsewhere (llama.cpp on this machine's cores) steps stay whole."""
        if not self.engine_alone or not any(j.chain.feeds_generation and not j.warm_only
                                            for j in jobs):
            return None
        post = self.inbox.poster()
        return Release(lambda results: post(Retrieved(results)), self.beta.value or 0.0)

    def released(self, event: Retrieved) -> list[tuple[RetJob, ScanResult | BaseException]]:
        """Retrievals the running cycle finished before its end, each with its result."""
        out: list[tuple[RetJob, ScanResult | BaseException]] = []
        for result in event.results:
            job = self.jobs.get(result.key)
            if job is not None:
                self._early[job.key] = job
                self._absorb(job, result, out)
        return out

    def collect(self, event: StepDone) -> list[tuple[RetJob, ScanResult | BaseException]]:
        """A search cycle ended: each job it carried and did not release early, with its result
        or its error."""
        self.future = None
        early, self._early = self._early, {}
        if event.future.cancelled():  # the run is closing
            return []
        out: list[tuple[RetJob, ScanResult | BaseException]] = []
        try:
            cycle: CycleResult = event.future.result()
        except Exception as err:  # the whole step failed: each request it carried fails
            carried = [j for j in self.jobs.values() if j.in_flight]
            for job in carried:
                self.jobs.pop(job.key)
            return [(job, err) for job in carried]
        self._account(cycle)
        count_shared(self.n, [self.jobs.get(r.key) or early.get(r.key) for r in cycle.results])
        for result in cycle.results:
            job = self.jobs.get(result.key)
            if job is not None:
                self._absorb(job, result, out)
        return out

    def _absorb(self, job: RetJob, result: ScanResult,
                out: list[tuple[RetJob, ScanResult | BaseException]]) -> None:
        job.in_flight = False
        if result.error is not None:
            self.jobs.pop(job.key)
            out.append((job, result.error))
            return
        job.absorb(result)
        if result.searched:
            job.scanning_s += clock() - self._cycle_started
        if self._resident is not None:
            hits = sum(1 for c in result.searched if c in self._resident)
            job.hot_hits = (job.hot_hits or 0) + hits
        if result.passages is not None:
            self._complete(job, result)
        out.append((job, result))

    def _complete(self, job: RetJob, result: ScanResult) -> None:
        self.jobs.pop(job.key)
        job.req.history = job.req.history.record(result.final.ids, job.probe,
                                                 self.s.search.cluster_of)
        self.t_r.add(self.cost.clusters_ms(job.probe.tolist()))
        # A speculative retrieval's span says what it warmed: the real one's cluster order.
        what = "warm" if job.warm_only else "retrieve"
        embedded = job.embedded_at if job.embedded_at is not None else job.started
        queued = max(embedded - job.started - job.embedding_s, 0.0)
        self.s.tracer.add_span(job.req.name, f"{what} {job.origin}", job.started, clock(),
                               engine=False, queue_s=queued, embed_s=job.embedding_s,
                               scan_s=job.scanning_s)

    def _split_check(self) -> SplitCheck | None:
        """A given --budget-ms is taken as it is; the adaptive one yields to a whole step where
        its split does not pay (`policies.split_pays`)."""
        if self.fixed_budget_ms is not None:
            return None
        return SplitCheck(waiting=len(self.to_prepare), beta_ms=self.beta.value or 0.0,
                          adoption=self.backoff.adoption)

    def _budget_ms(self, backlog_ms: float, step: list[RetJob] | None = None,
                   partial_wanted: bool = True) -> float:
        """The next step's budget; `step`: the retrievals it carries, where it is decided
        (`policies.step_budget_ms` takes a step of a few whole where none wants a partial)."""
        if self.fixed_budget_ms is not None:
            return self.fixed_budget_ms
        if self.streams():
            return math.inf
        follows = any(j.chain.feeds_generation
                      for j in self.jobs.values() if not j.warm_only)
        ready = None if step is None else sum(1 for j in step if not j.warm_only)
        return policies.step_budget_ms(self.beta.value or 0.0, self.t_r.value, backlog_ms,
                                       follows, ready, partial_wanted)

    def _account(self, cycle: CycleResult) -> None:
        self.n.search_steps += 1
        self.busy_s += cycle.wall_s
        self.n.vectors_scanned += cycle.vectors_scanned
        self.n.vectors_on_accelerator += cycle.vectors_on_accelerator
        clusters = sum(len(r.searched) for r in cycle.results)
        self.n.clusters_searched += clusters
        self.beta.add(max(cycle.wall_s - cycle.scan_s, 0.0) * 1e3)
        if cycle.predicted_ms > 0:
            self.cost = self.cost.observe(cycle.predicted_ms, cycle.scan_s * 1e3)
        self.s.tracer.add_span("search", f"step x{len(cycle.results)}", self._cycle_started,
                               clock(), clusters=clusters)


def timed(fn, *args):  # noqa: ANN001, ANN201 - a search-thread call and its seconds
    start = time.perf_counter()
    return fn(*args), time.perf_counter() - start
