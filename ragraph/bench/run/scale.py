"""`ragraph bench --ray ADDRESS`: throughput against the number of shards and engine replicas.

Two numbers per row. Search: queries per second of whole-probe-list steps (16 queries a step,
every query's clusters) on the sharded engine, beside the single-node engine on this process's
cores. Workflow: requests per second of an offline run of one workflow under the wavefront
scheduler with the index on the shards and the LLM side on `replicas` engines behind the replica
router (simulated GPUs by default, each its own simulated H100; or real OpenAI-compatible servers,
the first n of `--replicas`). Answers are compared with the first row's: scaling must not change
them. On one small machine the cores bound both; docs/guides/ray.md gives the cost model for
clusters of real nodes.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from ragraph.errors import ConfigError
from ragraph.runtime.search_service import SearchService

STEP_QUERIES = 16


@dataclass(frozen=True)
class ScaleBenchConfig:
    """The sweep `ragraph bench --ray` runs (shard and replica counts, the workload), not the
    run's own Ray part (`runtime.config.ScaleConfig`), which each row builds from it."""

    address: str
    index: Path | None = None  # None: the embedded default index
    shard_counts: tuple[int, ...] = (1, 2, 3)
    replica_counts: tuple[int, ...] = (1, 2)
    replica_urls: tuple[str, ...] = ()  # real servers; empty: simulated engines
    workflow: Path = Path("workflows/oneshot.rag")
    requests: int = 48
    concurrency: int = 16
    nprobe: int = 32
    shard_cpus: float = 1.0
    data: Path | None = None

    def __post_init__(self) -> None:
        if not self.shard_counts or min(self.shard_counts) < 1:
            raise ConfigError("--shard-counts", f"must be positive, got {self.shard_counts}")
        if not self.replica_counts or min(self.replica_counts) < 1:
            raise ConfigError("--replica-counts", f"must be positive, got {self.replica_counts}")
        if self.replica_urls and max(self.replica_counts) > len(self.replica_urls):
            raise ConfigError("--replica-counts", f"at most {len(self.replica_urls)} (--replicas)")


@dataclass(frozen=True)
class ScaleRow:
    shards: int  # 0: the single-node engine, no Ray
    replicas: int
    search_qps: float
    requests_per_s: float
    p50_s: float
    same_answers: bool
    retries: int


def run(config: ScaleBenchConfig, console: Console) -> list[ScaleRow]:
    from ragraph.bench.data.questions import load_questions
    from ragraph.runtime.app import open_search
    from ragraph.runtime.config import RuntimeConfig

    base = RuntimeConfig.of(engine="sim", index=str(config.index) if config.index else None,
                            nprobe=config.nprobe, concurrency=config.concurrency)
    single = open_search(base)
    directory = Path(config.index) if config.index else _default_dir()
    questions = load_questions(config.data).requests("oneshot", config.requests)
    vectors = single.embed_many([r.question for r in questions])
    rows: list[ScaleRow] = []
    reference: dict[str, str | None] | None = None
    for shards in (0, *config.shard_counts):
        search = single if shards == 0 else _sharded(config, directory, single, shards)
        qps = search_qps(search, vectors, config.nprobe)
        for replicas in config.replica_counts if shards else config.replica_counts[:1]:
            answers, row = _workflow_row(config, search, questions, shards, replicas, qps)
            reference = answers if reference is None else reference
            rows.append(replace(row, same_answers=answers == reference))
            console.log(_describe(rows[-1]))
        if shards:
            search.engine.close()  # type: ignore[attr-defined]
    return rows


def search_qps(search: SearchService, vectors: np.ndarray, nprobe: int) -> float:
    from ragraph.runtime.retrieval.protocol import ScanOrder, SearchTask

    probes = [search.probe(v, nprobe) for v in vectors]
    steps = [[SearchTask.of(v, p) for v, p in zip(vectors[i:i + STEP_QUERIES],
                                                  probes[i:i + STEP_QUERIES], strict=True)]
             for i in range(0, len(vectors), STEP_QUERIES)]
    search.step(steps[0], 10, ScanOrder.CLUSTER)  # warm: first calls load code and pages
    start = time.perf_counter()
    for tasks in steps:
        search.step(tasks, 10, ScanOrder.CLUSTER)
    return len(vectors) / (time.perf_counter() - start)


def _sharded(config: ScaleBenchConfig, directory: Path, single: SearchService,
             shards: int) -> SearchService:
    from ragraph.runtime.distributed import options
    from ragraph.runtime.distributed.search import open_sharded_search

    scale = options.ScaleConfig(shards=shards, shard_cpus=config.shard_cpus)
    return open_sharded_search(config.address, directory, single.embedder, scale, config.nprobe)


def _workflow_row(config: ScaleBenchConfig, search: SearchService, questions, shards: int,
                  replicas: int, qps: float) -> tuple[dict[str, str | None], ScaleRow]:
    from ragraph import dsl
    from ragraph.passes import compile
    from ragraph.runtime.app import execute
    from ragraph.runtime.config import RuntimeConfig
    from ragraph.runtime.executors.base import Services

    runtime = RuntimeConfig.of(engine="sim", concurrency=config.concurrency, nprobe=config.nprobe)
    router = _replicas(config, replicas)

    async def go():
        async with router:
            return await execute(compile(dsl.load(config.workflow), runtime.scheduler.passes),
                                 questions, runtime, Services(llm=router, search=search))

    result = asyncio.run(go())
    answers = {o.rid: o.answer for o in result.outcomes}
    s = result.summary
    return answers, ScaleRow(shards, replicas, qps, s.throughput_rps, s.p50_s, True,
                             len(result.faults))


def _replicas(config: ScaleBenchConfig, n: int):
    from ragraph.runtime.distributed.replicas import ReplicaRouter
    from ragraph.runtime.llm.http.openai import OpenAIHttpConfig, OpenAIHttpEngine
    from ragraph.runtime.llm.sim.engine import SimEngine

    if config.replica_urls:
        return ReplicaRouter([OpenAIHttpEngine(OpenAIHttpConfig(base_url=u, name=u))
                              for u in config.replica_urls[:n]])
    return ReplicaRouter([SimEngine() for _ in range(n)])


def _default_dir() -> Path:
    from ragraph.runtime.retrieval.build.corpus import default_index_dir

    return default_index_dir()


def _describe(r: ScaleRow) -> str:
    where = "1 node, no Ray" if r.shards == 0 else f"{r.shards} shard(s)"
    return (f"{where}, {r.replicas} replica(s): search {r.search_qps:.0f} q/s, workflow "
            f"{r.requests_per_s:.2f} req/s (p50 {r.p50_s:.2f} s), retries {r.retries}")


def table(rows: list[ScaleRow], simulated: bool) -> Table:
    engine = "SIMULATED H100 replicas" if simulated else "real server replicas"
    t = Table(title=f"throughput vs shards and replicas ({engine})")
    for name in ("shards", "replicas", "search q/s", "workflow req/s", "p50 s", "same answers",
                 "retries"):
        t.add_column(name, justify="right")
    for r in rows:
        t.add_row("1 node" if r.shards == 0 else str(r.shards), str(r.replicas),
                  f"{r.search_qps:.0f}", f"{r.requests_per_s:.2f}", f"{r.p50_s:.2f}",
                  "yes" if r.same_answers else "NO", str(r.retries))
    return t
