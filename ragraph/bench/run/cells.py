"""One benchmark cell: a workload (a workflow or a mix) at an nprobe and a request rate, run on
every executor in turn with the same requests at the same offsets on the same index.

Each executor gets a fresh LLM engine (an empty prefix cache and no queued work left from the
previous executor), a fresh tracer, and the shared search service (the index is loaded once).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from ragraph.api.load import compile_catalog
from ragraph.bench.data.traffic import top_share
from ragraph.bench.measure.bounds import Bound
from ragraph.bench.measure.counting import counted, embedded
from ragraph.bench.measure.llm_work import LlmWork
from ragraph.bench.measure.search_latency import SearchLatency, retrieval_share, search_latency
from ragraph.bench.run.arrivals import arrive
from ragraph.bench.server.alone import LABEL as SERVER_ALONE
from ragraph.bench.server.alone import replay
from ragraph.bench.server.stats import ServerCounters, erase_slots, read_counters, slot_count
from ragraph.ir.graph import RAGraph
from ragraph.runtime.app import app_client, execute, open_services
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.executors.app_clients import SentCall
from ragraph.runtime.llm.http.openai import api_key_from
from ragraph.runtime.outcome import Outcome, RunStats, Summary, summarize
from ragraph.runtime.request import Request
from ragraph.runtime.search_service import SearchService
from ragraph.runtime.threads import usable_cores
from ragraph.runtime.trace import Tracer

# Generation calls as the LangGraph app made them, in order.
Sent = list[SentCall]


@dataclass(frozen=True)
class Cell:
    workload: str  # a workflow name, or "mix"
    nprobe: int
    rate: float | None  # requests/s; None = offline (all at once)
    concurrency: int = 0  # requests in flight (0: the run's setting)

    @property
    def mode(self) -> str:
        return "offline" if self.rate is None else "online"


@dataclass(frozen=True)
class Variant:
    """One executor run of a cell: its label in the tables, the executor and its passes, and
    any other run setting it changes (RuntimeConfig field, value)."""

    label: str
    executor: str
    passes: str
    settings: tuple[tuple[str, object], ...] = ()


def plain(executors: Sequence[str], passes: str) -> list[Variant]:
    return [Variant(e, e, passes) for e in executors]


@dataclass(frozen=True)
class Job:
    """The requests of one workflow within a cell, with their arrival offsets."""

    graph: RAGraph | Mapping[str, RAGraph]  # several: a mix, each request names its own
    requests: tuple[Request, ...]
    offsets: tuple[float, ...]


@dataclass(frozen=True)
class CellResult:
    cell: Cell
    executor: str
    engine: str
    simulated: bool
    # Requests, errors, wall time, throughput and latencies, as every run reports them.
    summary: Summary
    retrieval_share: float | None  # of the summed request time, spent in retrieval nodes
    speculations: int
    speculation_hit_rate: float | None
    synthetic_share: float  # of the final passages handed to generations
    # Speculation's settlement (ragraph): speculative generations adopted and rolled back, the
    # tokens the rolled-back ones decoded (what rollbacks cost), the retrievals its backoff held
    # back (`scheduler.backoff`), speculative retrievals run.
    speculation_adopted: int = 0
    rollbacks: int = 0
    rollback_tokens: int = 0
    speculations_held_back: int = 0
    warm_searches: int = 0
    cpu_busy: float = 0.0  # process CPU time / (wall time x cores): 1.0 = every core saturated
    embed_busy: float = 0.0  # share of the wall time the (one-at-a-time) query embedder ran
    # The LLM engine's work, by its own counters: tokens computed and reused, seconds in
    # prompts and decode steps, the decode steps and what they advanced.
    llm: LlmWork = LlmWork()
    # On a llama-server: slots busy per llama_decode call, on average (its own count; its
    # decode_steps count prompt chunks too).
    server_batch: float | None = None
    # Share of this executor's answers equal to ragraph's on the same requests (None: ragraph).
    agree: float | None = None
    # Fan-out (ragraph): search steps, those that carried branches of a map, and those where two
    # or more branches of one map searched side by side; branch retrievals they advanced.
    search_steps: int = 0
    fan_steps: int = 0
    shared_steps: int = 0
    branch_searches: int = 0
    # Share of the vectors scanned (probed-cluster work) that the accelerator tier's hot-cluster
    # cache served during this run (None: the cache is off).
    hot_served: float | None = None
    # Share of the index's vectors the tier held at the end of the run (its hot set).
    hot_resident: float | None = None
    # Document popularity (`bench.data.traffic.top_share`): share of the passages retrieved
    # that the top 3% of the documents served, over each request's final top-k (None: none
    # retrieved).
    top_docs_share: float | None = None
    # Work beside the LLM engine's: queries embedded and their tokens, vectors scanned
    # (ragraph's own count; 0 where the executor does not count them), and the least time the
    # run's work could take on these engines (`bench.measure.bounds`; None: not measured).
    queries_embedded: int = 0
    query_tokens: int = 0
    vectors_scanned: int = 0
    # The retrievals' search latency, from the query ready to its top-k (None: none traced).
    search: SearchLatency | None = None
    bound: Bound | None = None
    repeat: int = 0  # which repeat of the cell this run was (`bench.output.repeats`), from 0

    @property
    def bound_share(self) -> float | None:
        """The bound's time over this run's: 1.0 is as fast as these engines allow."""
        return None if self.bound is None else self.bound.share(self.summary.wall_s)

    @property
    def engine_busy(self) -> float | None:
        """Share of the wall time the LLM engine computed (simulated seconds for sim)."""
        wall = self.summary.wall_s
        return self.llm.busy_s / wall if wall > 0 else None


async def run_cell(cell: Cell, jobs: Sequence[Job], runtime: RuntimeConfig, search: SearchService,
                   variants: Sequence[Variant], on_done: Callable[[Outcome], None]
                   ) -> list[CellResult]:
    search = counted(replace(search, nprobe=cell.nprobe))
    results, answers = [], {}
    sent: Sent = []  # the generation calls of the last LangGraph app run
    for v in variants:
        if v.executor == SERVER_ALONE:  # not an executor: no workflow runs
            requests = sum(len(job.requests) for job in jobs)
            result = await _server_alone(cell, runtime, sent, requests)
        else:
            config = runtime.with_knobs(executor=v.executor, passes=v.passes, nprobe=cell.nprobe,
                                        concurrency=cell.concurrency
                                        or runtime.scheduler.concurrency, **dict(v.settings))
            result, answers[v.label], sent = await _run_executor(cell, jobs, config, search,
                                                                 on_done)
        results.append(replace(result, executor=v.label))
    return [replace(r, agree=agreement(answers.get(r.executor), answers.get("ragraph")))
            for r in results]


def agreement(mine: dict[str, str | None] | None,
              reference: dict[str, str | None] | None) -> float | None:
    """Share of the reference's answers this run gave too (None: no answers to compare, as
    from the server alone, or the reference itself)."""
    if mine is None or reference is None or mine is reference or not reference:
        return None
    return sum(mine.get(rid) == answer for rid, answer in reference.items()) / len(reference)


async def _run_executor(cell: Cell, jobs: Sequence[Job], config: RuntimeConfig,
                        search: SearchService, on_done
                        ) -> tuple[CellResult, dict[str, str | None], Sent]:
    """A fresh LLM engine (or the LangGraph app's own client) per executor, the shared index;
    on a llama-server, empty slots at the start and its own counters of the run's work."""
    tracer = Tracer()
    # Compiled where the run is set up, outside the timed window: execute runs programs.
    catalogs = [compile_catalog(job.graph, config.scheduler.passes) for job in jobs]
    server = await asyncio.to_thread(_server_before, config)
    async with open_services(config, search, tracer) as services, \
            app_client(config, services) as client:
        loop = asyncio.get_running_loop()
        llm = client or services.llm
        start, cpu_start, embed_start = loop.time(), time.process_time(), search.embed_seconds
        embedded_start = embedded(search)
        cache_start = _cache_stats(search)
        runs = await asyncio.gather(*(
            execute(catalog, arrive(job.requests, job.offsets), config, services, on_done,
                    client)
            for catalog, job in zip(catalogs, jobs, strict=True)))
        wall, cpu = loop.time() - start, time.process_time() - cpu_start
        embed = search.embed_seconds - embed_start
        queries = embedded(search) - embedded_start
        cache_end = _cache_stats(search)
        hot = _served_between(cache_start, cache_end)
        used = llm.counters()
        sent = list(getattr(client, "sent", ()))
    outcomes = [o for run in runs for o in run.outcomes]
    result = _result(cell, config.scheduler.executor, runs[0].engine, runs[0].simulated, outcomes,
                     [run.stats for run in runs], tracer, wall)
    result = replace(result, llm=LlmWork.of(used), hot_served=hot,
                     queries_embedded=queries.queries,
                     query_tokens=queries.tokens,
                     hot_resident=None if cache_end is None else cache_end.resident_fraction)
    if server is not None:
        result = _server_work(result, config, server)
    if wall > 0:
        result = replace(result, cpu_busy=cpu / (wall * usable_cores()), embed_busy=embed / wall)
    return result, {o.rid: o.answer for o in outcomes}, sent


def _server_before(config: RuntimeConfig) -> ServerCounters | None:
    """On a llama-server: every slot emptied, then its counters (None on other engines)."""
    if config.llm.engine != "openai" or not config.llm.url:
        return None
    key = api_key_from(config.llm.api_key_env)
    slots = slot_count(config.llm.url, api_key=key)
    if slots is None:
        return None
    erase_slots(config.llm.url, slots, api_key=key)
    return read_counters(config.llm.url, api_key=key)


def _server_work(result: CellResult, config: RuntimeConfig,
                 before: ServerCounters) -> CellResult:
    """The run's work as the server counted it: the same measure whoever sent the requests."""
    after = read_counters(config.llm.url or "", api_key=api_key_from(config.llm.api_key_env))
    if after is None:
        return result
    work = after.minus(before)
    llm = replace(result.llm, llm_tokens=work.prompt_tokens + work.predicted_tokens,
                  cached_tokens=work.cached_tokens, completion_tokens=work.predicted_tokens,
                  decode_steps=work.decodes)
    return replace(result, llm=llm, server_batch=work.batch)


async def _server_alone(cell: Cell, config: RuntimeConfig, sent: Sent,
                        requests: int) -> CellResult:
    """The app's server work alone (`bench.server.alone`): its calls replayed straight to it."""
    before = await asyncio.to_thread(_server_before, config)
    done = await replay(config.llm.url or "", config.llm.model or "default", sent,
                        api_key=api_key_from(config.llm.api_key_env))
    result = CellResult(
        cell=cell, executor=SERVER_ALONE, engine="openai-http", simulated=False,
        summary=done.summary(requests), retrieval_share=None, speculations=0,
        speculation_hit_rate=None, synthetic_share=0.0)
    return result if before is None else await asyncio.to_thread(_server_work, result, config,
                                                                 before)


def _cache_stats(search: SearchService):
    cache = search.hot_cache
    return None if cache is None else cache.stats()


def _served_between(before, after) -> float | None:
    if before is None or after is None:
        return None
    scanned = after.vectors_scanned - before.vectors_scanned
    served = after.vectors_on_accelerator - before.vectors_on_accelerator
    return served / scanned if scanned else None


def _result(cell: Cell, executor: str, engine: str, simulated: bool, outcomes: list[Outcome],
            stats: list[RunStats], tracer: Tracer, wall: float) -> CellResult:
    speculations = sum(s.speculations for s in stats)
    hits = sum(s.speculation_hits for s in stats)
    return CellResult(
        cell=cell, executor=executor, engine=engine, simulated=simulated,
        summary=summarize(outcomes, wall), retrieval_share=retrieval_share(tracer, outcomes),
        search=search_latency(tracer, outcomes),
        speculations=speculations,
        speculation_hit_rate=hits / speculations if speculations else None,
        synthetic_share=synthetic_share(outcomes),
        speculation_adopted=hits, rollbacks=sum(s.rollbacks for s in stats),
        rollback_tokens=sum(s.rollback_tokens for s in stats),
        speculations_held_back=sum(s.speculations_held_back for s in stats),
        warm_searches=sum(s.warm_searches for s in stats),
        top_docs_share=document_popularity(outcomes),
        search_steps=sum(s.search_steps for s in stats),
        vectors_scanned=sum(s.vectors_scanned for s in stats),
        fan_steps=sum(s.fan_steps for s in stats),
        shared_steps=sum(s.shared_steps for s in stats),
        branch_searches=sum(s.branch_searches for s in stats),
    )


def document_popularity(outcomes: Sequence[Outcome]) -> float | None:
    """The top 3% documents' share of the retrievals, one per request: its final top-k, the
    passages its answer was generated from (all the LangGraph app reports, so every executor is
    counted alike)."""
    return top_share([p.id for p in o.passages] for o in outcomes if o.passages is not None)


def synthetic_share(outcomes: Sequence[Outcome]) -> float:
    passages = [p for o in outcomes if o.passages is not None for p in o.passages]
    return sum(p.synthetic for p in passages) / len(passages) if passages else 0.0
