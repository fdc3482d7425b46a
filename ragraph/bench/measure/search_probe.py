"""The embedder's and the search engine's own costs, measured alone before a bench run's first
cell (`bench.measure.bounds`), each on one thread and on every core.

The embedder: a batch of PROBE_QUERIES questions and one of the same questions four times as
long, each on one thread and on every core: a query's cost and a token's (IRG's queries, a
question and the last answer, hold several times a question's tokens and cost as many times
more). The search engine, at each nprobe of the run, on one thread and on every core: those
questions probed and scanned in one balanced step (faiss's rows), and as many as the run keeps
in flight in one list-order step (list-major where they share lists, cheaper a vector than
faiss's rows). `bounds` takes each part's fastest and cheapest in core-seconds (the executors
give them different threads). Figures: docs/benchmarks/seeds.md#bounds-per-cell.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass

import numpy as np

from ragraph.bench.measure.bounds import fit_line
from ragraph.bench.measure.counting import count_tokens
from ragraph.runtime.retrieval.protocol import ScanOrder, SearchTask
from ragraph.runtime.search_service import SearchService

PROBE_QUERIES = 16
K = 10


@dataclass(frozen=True)
class SearchRates:
    """What a query's embedding and a vector's scan cost, alone (`bounds.Rates` says how)."""

    embed_s: float  # seconds a query at the embedder's fastest, before its tokens
    embed_tok_s: float  # plus seconds a token
    embed_core_s: float  # core-seconds a query at its cheapest, before its tokens
    embed_tok_core_s: float  # plus core-seconds a token
    probe_tokens: float  # tokens a probe question held (0: not counted)
    scan_vec_s: float  # vectors a core scans a second at its cheapest
    per_query: tuple[tuple[int, float], ...]  # vectors a query scans, by nprobe


@contextmanager
def faiss_threads(count: int) -> Iterator[None]:
    """faiss's OpenMP threads for the calling thread's steps (libgomp keeps the count per
    thread), put back after."""
    import faiss

    with ExitStack() as restore:
        restore.callback(faiss.omp_set_num_threads, faiss.omp_get_max_threads())
        faiss.omp_set_num_threads(count)
        yield


def probe_search(search: SearchService, questions: Sequence[str], nprobes: Sequence[int],
                 cores: int, batch: int, clock: Callable[[], float] = time.perf_counter,
                 threads: Callable[[int], AbstractContextManager[None]] = faiss_threads,
                 ) -> SearchRates:
    """The embedder and the search engine alone, each on one thread and on `cores`
    (`threads(n)`: the scans' threads while it is held); `batch`: the most retrievals the
    run keeps in flight, the largest step it can scan."""
    counts = sorted({1, cores})
    short = list(questions[:PROBE_QUERIES])
    long = [" ".join([q] * 4) for q in short]  # four times the tokens, of the same kind
    fastest, cheapest, held = _embed_costs(search, short, long, counts, clock)
    vectors = search.embed_many(list(questions[:max(batch, PROBE_QUERIES)]), threads=cores)
    scans, per_query = [], ()
    for n in counts:
        with threads(n):
            # faiss's rows for a few queries; a list-order step of the batch reads each list
            # once for all its queries where they share it (list-major), cheaper a vector.
            for step, order in ((vectors[:PROBE_QUERIES], ScanOrder.BALANCED),
                                (vectors, ScanOrder.LIST)):
                per_vector, per_query = _scan_cost(search, step, nprobes, order, clock)
                scans.append(n * per_vector)
    least = min(scans)
    return SearchRates(*fastest, *cheapest, held, 1 / least if least > 0 else 0.0, per_query)


def _embed_costs(search: SearchService, short: Sequence[str], long: Sequence[str],
                 counts: Sequence[int], clock: Callable[[], float]
                 ) -> tuple[tuple[float, float], tuple[float, float], float]:
    """((seconds a query, a token) at the embedder's fastest, (core-seconds a query, a token)
    at its cheapest, tokens a short text held): a batch of short and of long texts at each
    thread count, the better of two (the machine may be busy a moment), and the line through
    them (a flat one where no tokens are counted)."""
    held = [count_tokens(search.embedder, texts) / len(texts) for texts in (short, long)]
    lines = []
    for n in counts:
        search.embed_many(short[:1], threads=n)  # untimed: the first call's one-off costs
        points = []
        for texts, tokens in zip((short, long) if held[0] else (short,), held, strict=False):
            points.append((tokens, min(_timed(search, texts, n, clock) for _ in range(2))))
        query_s, token_s = fit_line(points)
        if token_s == 0:  # no dearer a token: the cheaper batch's cost, a query
            query_s = min(y for _, y in points)
        lines.append((n, query_s, token_s))
    fastest = (min(q for _, q, _ in lines), min(t for _, _, t in lines))
    cheapest = (min(n * q for n, q, _ in lines), min(n * t for n, _, t in lines))
    return fastest, cheapest, held[0]


def _timed(search: SearchService, texts: Sequence[str], threads: int,
           clock: Callable[[], float]) -> float:
    """Seconds a text, embedding `texts` in one batch on `threads`."""
    start = clock()
    search.embed_many(texts, threads=threads)
    return (clock() - start) / len(texts)


def _scan_cost(search: SearchService, vectors: np.ndarray, nprobes: Sequence[int],
               order: ScanOrder, clock: Callable[[], float]
               ) -> tuple[float, tuple[tuple[int, float], ...]]:
    """(seconds a vector probed and scanned, vectors a query scans by nprobe): one step of
    every query in `order` at each nprobe."""
    scanned, seconds, per_query = 0, 0.0, []
    for nprobe in nprobes:
        start = clock()
        tasks = [SearchTask.of(v, search.probe(v, nprobe)) for v in vectors]
        step = search.step(tasks, K, order)
        seconds += clock() - start
        scanned += step.stats.vectors_scanned
        per_query.append((nprobe, step.stats.vectors_scanned / len(tasks)))
    return seconds / scanned if scanned else 0.0, tuple(per_query)
