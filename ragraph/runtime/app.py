"""Assembling a run: engines from the config, the executor, requests in, outcomes out."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ragraph.runtime.catalog import Catalog, Compiled
from ragraph.runtime.config import RuntimeConfig, SearchConfig
from ragraph.runtime.distributed.faults import Fault, faults_of
from ragraph.runtime.executors.app_clients import AppLLM, opened_app_llm, uses_own_client
from ragraph.runtime.executors.base import Services, arrive_all
from ragraph.runtime.outcome import Outcome, RunStats, Summary, summarize
from ragraph.runtime.request import Request
from ragraph.runtime.search_service import SearchService
from ragraph.runtime.trace import Tracer

if TYPE_CHECKING:
    from ragraph.runtime.distributed.search import ShardedIndex


def create_llm(config: RuntimeConfig):
    """The engine of the run's LLM part, sized for the scheduler's requests in flight."""
    from ragraph.runtime.llm.registry import engine_for

    if config.llm.replicas:
        from ragraph.runtime.distributed.replicas import replicas_for

        return replicas_for(config.llm)
    return engine_for(config.llm, config.scheduler.concurrency)


def open_search(config: RuntimeConfig, progress=None,
                embed_threads: int | None = None) -> SearchService:
    """The index (the embedded default unless `config.search.index`), its store and the query
    embedder its manifest names (or `search.embedder_url`'s server of that model), on the GPU
    paths of `search.gpu`, its lists on `config.scale.ray`'s shards when given; the embedder's
    CPU threads: `embed_threads`, else the search threads."""
    import faiss

    from ragraph.runtime.retrieval.manifest import load_index

    faiss.omp_set_num_threads(config.search.search_threads)
    if config.scale.ray is not None:
        from ragraph.runtime.distributed.ray_env import require_ray

        require_ray()  # before the embedder loads: a missing extra is the first thing said
        index = start_sharded_index(config, progress)
        embedder = index_embedder(index.directory, config.search, embed_threads)
        return index.search(embedder, config.search.nprobe, owner=True)
    if config.search.index is None:
        from ragraph.runtime.retrieval.build.corpus import ensure_default_index

        loaded = ensure_default_index(progress)
    else:
        loaded = load_index(Path(config.search.index))
    embedder = index_embedder(loaded.directory, config.search, embed_threads)
    return SearchService(on_gpu_paths(loaded.engine, config.search), embedder, loaded.store,
                         nprobe=config.search.nprobe)


def index_embedder(directory: Path, search: SearchConfig, embed_threads: int | None = None):
    """The query embedder of the index in `directory`, as its manifest records it: the local
    model, or the server at `search.embedder_url` once it is known to serve that model."""
    from ragraph.runtime.retrieval.embed.spec import check_compatible
    from ragraph.runtime.retrieval.manifest import Manifest

    spec = Manifest.read(Path(directory)).embedder_spec
    if search.embedder_url is None:
        from ragraph.runtime.retrieval.embed.embedder import query_embedder

        return query_embedder(spec, threads=embed_threads or search.search_threads,
                              device=search.gpu.device)
    from ragraph.runtime.retrieval.embed.http import HttpEmbedder, HttpEmbedderConfig

    embedder = HttpEmbedder(HttpEmbedderConfig(search.embedder_url, role="query",
                                               query_prompt=spec.query_prompt,
                                               passage_prompt=spec.passage_prompt))
    check_compatible(spec, embedder.spec, f"index {directory}")
    return embedder


def start_sharded_index(config: RuntimeConfig, progress=None) -> ShardedIndex:
    """Join `config.scale.ray`'s cluster and start the shard actors for the run's index (the
    embedded default unless `config.search.index`)."""
    from ragraph.runtime.distributed.search import ShardedIndex
    from ragraph.runtime.retrieval.manifest import Manifest

    if config.search.index is None:
        from ragraph.runtime.retrieval.build.corpus import ensure_default_index

        directory = ensure_default_index(progress).directory
    else:
        directory = Path(config.search.index)
    spec = Manifest.read(directory).embedder_spec
    return ShardedIndex.start(config.scale.ray or "auto", directory, config.scale, spec.name,
                              spec.dim)


def open_attached_search(index: ShardedIndex, config: RuntimeConfig) -> SearchService:
    """The search side of one of several processes sharing `index`'s shards (a Serve replica
    of `serve --ray`): its own query embedder and passage store; the shards stay up when it
    closes."""
    import faiss

    faiss.omp_set_num_threads(config.search.search_threads)
    return index.search(index_embedder(index.directory, config.search), config.search.nprobe)


def on_gpu_paths(engine, search: SearchConfig):
    """The search engine with its hottest clusters resident on the accelerator when
    `search.gpu` says the hot-cluster cache is on, else `engine` itself."""
    from ragraph.runtime.retrieval.tier.hotcache import HotCacheConfig, HotClusterCache
    from ragraph.runtime.retrieval.tier.tiered import TieredEngine

    if not search.gpu.hot_cache:
        return engine
    cache = HotClusterCache(engine, HotCacheConfig.of(search, engine.nlist))
    return TieredEngine(engine, cache)


@asynccontextmanager
async def open_services(config: RuntimeConfig, search: SearchService | None = None,
                        tracer: Tracer | None = None) -> AsyncIterator[Services]:
    """The run's engines; with `config.otlp`, its spans go to that collector (telemetry/)."""
    from ragraph.runtime.telemetry.otlp import exporting, require_otel

    if config.otlp is not None:
        require_otel()  # before any engine loads: a missing extra is the first thing said
    llm = create_llm(config)
    try:
        # The LangGraph app's own client is its executor's to open (langgraph_exec.py).
        if not uses_own_client(config.llm, config.scheduler.executor):
            await llm.start()
        services = Services(llm=llm, search=search or open_search(config),
                            tracer=tracer or Tracer(),
                            search_threads=config.search.search_threads)
        async with exporting(config, services.hooks, llm, services.search):
            yield services
    finally:
        await llm.close()


@asynccontextmanager
async def app_client(config: RuntimeConfig, services: Services) -> AsyncIterator[AppLLM | None]:
    """The LangGraph app's LLM client opened ahead of its runs (`execute(client=...)`), for a
    caller that measures them without the model's load or reads the client's counters; None
    for the other executors."""
    if config.scheduler.executor != "langgraph":
        yield None
        return
    async with opened_app_llm(config.llm, services.llm) as client:
        yield client


def make_executor(config: RuntimeConfig, services: Services, client: AppLLM | None = None):
    """The executor of `config.scheduler.executor`, with its requests in flight; `client`: the
    LangGraph app's LLM client, opened by the caller (else the executor opens its own)."""
    scheduler = config.scheduler
    if scheduler.executor == "sequential":
        from ragraph.runtime.executors.sequential import SequentialExecutor

        return SequentialExecutor(services, concurrency=scheduler.concurrency)
    if scheduler.executor == "stage-batched":
        from ragraph.runtime.executors.stage_batched import StageBatchedExecutor

        return StageBatchedExecutor(services, batch_size=scheduler.concurrency)
    if scheduler.executor == "langgraph":
        from ragraph.runtime.executors.langgraph_exec import LangGraphExecutor

        return LangGraphExecutor(services, concurrency=scheduler.concurrency, llm=config.llm,
                                 client=client)
    from ragraph.runtime.scheduler.wavefront import WavefrontExecutor

    return WavefrontExecutor(services, scheduler)


@dataclass(frozen=True)
class RunResult:
    outcomes: tuple[Outcome, ...]
    stats: RunStats
    summary: Summary
    executor: str
    engine: str
    simulated: bool
    # Every retry the engines made (a shard step re-sent, a generation failed over).
    faults: tuple[Fault, ...] = ()


async def execute(
    workflow: Compiled | Catalog,
    requests: Iterable[Request] | AsyncIterator[Request],
    config: RuntimeConfig,
    services: Services,
    on_done: Callable[[Outcome], None] | None = None,
    client: AppLLM | None = None,
) -> RunResult:
    """Run `requests` through `workflow` with the executor of `config` on shared `services`.

    `workflow` may be several workflows by name; each request then names its own
    (`Request.workflow`), and all of them share the engines and the scheduler. Workflows come
    compiled (`ragraph.compile(graph, config.scheduler.passes)`): what runs is their program.
    `client`: the LangGraph app's LLM client, for a caller that opens it (`app_client`)
    outside what it measures and reads its counters after."""
    outcomes: list[Outcome] = []

    def done(outcome: Outcome) -> None:
        outcomes.append(outcome)
        if on_done is not None:
            on_done(outcome)

    catalog = workflow if isinstance(workflow, Catalog) else Catalog.of(workflow)
    executor = make_executor(config, services, client)
    arrivals = requests if hasattr(requests, "__aiter__") else arrive_all(requests)
    started: list[float] = []

    async def timed() -> AsyncIterator[Request]:
        # The run's clock starts when the executor takes its first request: its own set-up
        # (the cost model's calibration, the LangGraph app's model) is not the requests' time.
        started.append(time.perf_counter())
        async for request in arrivals:
            yield request

    stats = await executor.run(catalog, timed(), done)
    start = started[0] if started else time.perf_counter()
    return run_result(tuple(outcomes), stats, time.perf_counter() - start, executor.name,
                      services)


def run_result(outcomes: tuple[Outcome, ...], stats: RunStats, wall_s: float, executor: str,
               services: Services) -> RunResult:
    """A run's report: its outcomes, counters and summary over `wall_s`, and the retries the
    engines made."""
    return RunResult(outcomes, stats, summarize(outcomes, wall_s), executor, services.llm.name,
                     bool(services.llm.simulated), faults_of(services.search, services.llm))
