"""Does the wavefront feed its search engine? Search throughput at saturation against the
engine's own (issue 15: the wavefront's search throughput at saturation >= 90% of its engine's).

    python benchmarks/feed_bench.py [--vectors 1000000] [--nlist 1024] [--batch 64]

On N clustered random vectors (d 384, IVF-Flat, inner product): the engine's own throughput is
one step of `batch` queries' whole probe lists in list order (what the engine does when fed as
well as it can be); the wavefront's is a retrieval-only workflow with 4 x `batch` requests,
`batch` in flight, offline, through the real scheduler (budgeted steps, batching, the cost
model), queries embedded by a lookup table so that only the search is measured. The cost model is
calibrated before the clock starts (once per engine, as at a server's start-up), and both sides
report their best of `--repeats`. Not a test: timings depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Sequence

import numpy as np
from search_bench import K, clustered_index, one_step

from ragraph.ir.graph import RAGraph
from ragraph.ir.nodes import END, START
from ragraph.ir.values import Passage, Passages
from ragraph.runtime.retrieval.protocol import ScanOrder


class LookupEmbedder:
    """Query text "q<i>" -> the i-th bench query vector."""

    name = "lookup"

    def __init__(self, vectors: np.ndarray) -> None:
        self.vectors = vectors
        self.dim = vectors.shape[1]

    def embed(self, texts: Sequence[str], threads: int | None = None) -> np.ndarray:
        return self.vectors[[int(t[1:]) for t in texts]]


class IdStore:
    def lookup(self, ids, scores=None) -> Passages:
        return Passages(tuple(Passage(int(i), "", "") for i in np.asarray(ids).reshape(-1)))


def retrieval_only(nprobe: int) -> RAGraph:
    g = RAGraph("search-only")
    g.add_input("question")
    g.add_retrieval("search", topk=K, query="question", output="docs", nprobe=nprobe)
    g.add_edge(START, "search")
    g.add_edge("search", END)
    return g


async def wavefront_rate(engine, queries: np.ndarray, nprobe: int, batch: int, passes: str) -> float:
    from ragraph.passes import compile
    from ragraph.runtime.app import execute
    from ragraph.runtime.config import RuntimeConfig
    from ragraph.runtime.executors.base import Services
    from ragraph.runtime.llm.sim.engine import SimEngine
    from ragraph.runtime.request import Request
    from ragraph.runtime.search_service import SearchService

    search = SearchService(engine, LookupEmbedder(queries), IdStore(), nprobe=nprobe)
    requests = [Request(f"r{i}", f"q{i}") for i in range(len(queries))]
    config = RuntimeConfig.of(engine="sim", concurrency=batch, passes=passes)
    async with SimEngine() as llm:
        start = time.perf_counter()
        result = await execute(compile(retrieval_only(nprobe), passes), requests, config,
                               Services(llm, search))
        wall = time.perf_counter() - start
    assert not any(o.error for o in result.outcomes), [o.error for o in result.outcomes][:3]
    return len(queries) / wall


def main() -> None:
    import faiss

    from ragraph.runtime.retrieval.ivf.cost import calibrated
    from ragraph.runtime.retrieval.ivf.engine import FaissIVFEngine

    args = parse_args()
    rng = np.random.default_rng(0)
    index, x = clustered_index(args.vectors, 384, args.nlist, rng)
    n = 4 * args.batch
    queries = x[rng.choice(args.vectors, n, replace=False)] + 0.02 * rng.standard_normal(
        (n, 384), np.float32)
    del x
    engine = FaissIVFEngine(index)
    print(f"{args.vectors} vectors, IVF{args.nlist}, {faiss.omp_get_max_threads()} threads, "
          f"{args.batch} in flight, {n} requests: queries/s (higher is better)")
    print(f"{'nprobe':>6} {'engine':>8} {'wavefront -O2':>13} {'-O0':>8} {'-O2/engine':>10} "
          f"{'-O0/engine':>10}")
    calibrated(engine)
    for nprobe in (128, 256):
        best = min(_timed(lambda n=nprobe: one_step(engine, queries[:args.batch], n, ScanOrder.LIST))
                   for _ in range(args.repeats))
        own = args.batch / best
        o2, o0 = (max(asyncio.run(wavefront_rate(engine, queries, nprobe, args.batch, passes))
                      for _ in range(args.repeats)) for passes in ("-O2", "-O0"))
        print(f"{nprobe:>6} {own:8.0f} {o2:13.0f} {o0:8.0f} {o2 / own:10.2f} {o0 / own:10.2f}")


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--vectors", type=int, default=1_000_000)
    p.add_argument("--nlist", type=int, default=1024)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    return p.parse_args()


if __name__ == "__main__":
    main()
