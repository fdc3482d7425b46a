"""A whole bench run: index, questions, every cell on every executor, then tables, CSV and plots."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ragraph.bench.data.questions import QuestionPool
from ragraph.bench.measure.bounds import AFTER, BEFORE, Rates
from ragraph.bench.run.arrivals import offsets_for
from ragraph.bench.run.cells import Cell, CellResult, Job, run_cell
from ragraph.bench.run.config import BenchConfig
from ragraph.bench.run.work import with_bound, with_least_bound
from ragraph.bench.server.alone import LABEL as SERVER_ALONE
from ragraph.ir.graph import RAGraph
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.search_service import SearchService


@dataclass(frozen=True)
class Workbench:
    """Everything a bench run shares across cells."""

    config: BenchConfig
    graphs: dict[str, RAGraph]
    questions: QuestionPool
    search: SearchService
    runtime: RuntimeConfig
    rates: Rates | None = None  # the engines' own, measured alone (`bench.measure.probe`)


CellProgress = Callable[[Cell, int], Callable[[object], None]]
# Requests of the untimed run before the first cell.
WARM_UP_REQUESTS = 4
CellDone = Callable[[Sequence[CellResult]], None]


def make_jobs(bench: Workbench, workload: str, rate: float | None, count: int,
              seed: int) -> list[Job]:
    """The requests of one cell: one workflow's questions, or a seeded random mix of workflows
    sharing one arrival process and one executor (each request names its workflow)."""
    offsets = tuple(float(t) for t in offsets_for(rate, count, seed))
    traffic = bench.config.traffic
    # Uniform: offsets into the question lists differ per cell seed, so cells do not repeat
    # questions. Zipf: the cell seed seeds the draw. Made once per cell, so every executor of
    # the cell gets these very requests.
    if workload != "mix":
        requests = bench.questions.requests(bench.graphs[workload].name, count, offset=seed * 97,
                                            traffic=traffic, seed=seed + 11)
        return [Job(bench.graphs[workload], tuple(requests), offsets)]
    names = bench.config.workflows
    pick = np.random.default_rng(seed + 7).integers(len(names), size=count)
    pools = {n: iter(bench.questions.requests(bench.graphs[n].name, count, offset=seed * 97,
                                              traffic=traffic, seed=seed + 11))
             for n in names}
    requests = tuple(replace(next(pools[names[i]]), workflow=names[i]) for i in pick)
    return [Job(dict(bench.graphs), requests, offsets)]


def auto_rates(offline: Sequence[CellResult], points: int) -> tuple[float, ...]:
    """A geometric sweep from half the slowest executor's offline throughput to twice the
    fastest one's: it brackets every executor's saturation point (the knee of the curves)."""
    thr = [r.summary.throughput_rps for r in offline if r.summary.throughput_rps > 0]
    if not thr:
        return ()
    lo, hi = 0.5 * min(thr), 2.0 * max(thr)
    if points == 1:
        return (round(max(thr), 3),)
    return tuple(round(lo * (hi / lo) ** (i / (points - 1)), 3) for i in range(points))


async def run_cells(bench: Workbench, progress: CellProgress,
                    cell_done: CellDone | None = None) -> list[CellResult]:
    config = bench.config
    rows: list[CellResult] = []
    await warm_up(bench)
    probing = bench.search is not None and bench.rates is None
    if probing:
        bench = replace(bench, rates=await measure_rates(bench, BEFORE))
    # The online rates the first repeat chose, offered again in every later one, so that a
    # cell's runs are the same requests at the same rates (`bench.output.repeats`).
    swept: dict[tuple[str, int, int], tuple[float, ...]] = {}
    for repeat in range(config.repeat):
        for w, workload in enumerate(config.workloads):
            for nprobe in config.nprobes:
                for conc in config.concurrencies:
                    rows += await _cells_at(bench, workload, nprobe, conc,
                                            config.seed + 1000 * w + nprobe, progress,
                                            cell_done, repeat=repeat, swept=swept)
    if probing and rows:
        # The same engines probed again: on a shared VM their speed moved by a fifth between
        # minutes (the prefill rate probed 647 and 827 tokens/s in consecutive quiet runs), and
        # a bound priced at a slow minute reads ragraph's share too high.
        again = await measure_rates(bench, AFTER)
        rows = [with_least_bound(r, again) for r in rows]
    return rows


async def warm_up(bench: Workbench) -> None:
    """A short untimed run of the first variant before the first cell. A process's first run
    also pays for first use (the embedder's first forward passes, the index's and the model's
    pages, allocator growth), and without this the first variant of the first cell carries it
    alone: measured, 6% of ragraph's throughput on the llama.cpp preset's first cell."""
    config = bench.config
    if not config.workloads:
        return
    workload = config.workloads[0]
    cell = Cell(workload, config.nprobes[0], None, config.concurrencies[0])
    jobs = make_jobs(bench, workload, None, WARM_UP_REQUESTS, config.seed - 1)
    await run_cell(cell, jobs, bench.runtime, bench.search, config.variants()[:1],
                   lambda _outcome: None)


async def measure_rates(bench: Workbench, probed: str) -> Rates:
    """The engines' own rates, each alone (`bench.measure.probe`), `probed` before the first cell
    (after the warm-up) or after the last: what every cell's bound is priced at."""
    from ragraph.bench.measure.probe import probe_rates, shares_cores
    from ragraph.runtime.app import create_llm
    from ragraph.runtime.threads import usable_cores

    config = bench.config
    questions = [q for q, _ in bench.questions.single_hop]
    rates = await probe_rates(create_llm(bench.runtime), bench.search, questions, config.nprobes,
                              max(config.concurrencies),
                              shares_cores(config.run.llm.engine, config.run.llm.url),
                              usable_cores())
    return replace(rates, probed=probed)


async def _cells_at(bench: Workbench, workload: str, nprobe: int, conc: int, seed: int,
                    progress: CellProgress, cell_done: CellDone | None, repeat: int,
                    swept: dict[tuple[str, int, int], tuple[float, ...]]) -> list[CellResult]:
    """The offline run, then the online rates, of one workload at one nprobe and concurrency.
    Online runs only at the first concurrency listed: arrivals, not the cap, set how many
    requests are in flight there until an executor falls behind, and each rate costs a window
    of arrivals on every executor. `swept`: the automatic rates chosen so far, reused."""
    config = bench.config
    rows: list[CellResult] = []
    offline: list[CellResult] = []
    if config.offline:
        offline = await _cell(bench, Cell(workload, nprobe, None, conc),
                              config.offline_requests, seed, progress, repeat)
        rows += offline
        if cell_done is not None:
            cell_done(offline)
    if conc != config.concurrencies[0]:
        rates: tuple[float, ...] = ()
    elif config.rates is not None:
        rates = config.rates
    else:
        rates = swept.setdefault((workload, nprobe, conc),
                                 auto_rates(offline, config.rate_points))
    for i, rate in enumerate(rates):
        cell = await _cell(bench, Cell(workload, nprobe, rate, conc),
                           online_requests(config, rate), seed + i + 1,
                           progress, repeat)
        rows += cell
        if cell_done is not None:
            cell_done(cell)
    return rows


def online_requests(config: BenchConfig, rate: float) -> int:
    """The requests of an online run: the window's arrivals at `rate`, at least 8, at most
    the config's cap."""
    return min(config.max_online_requests, max(8, math.ceil(rate * config.window_s)))


async def _cell(bench: Workbench, cell: Cell, count: int, seed: int,
                progress: CellProgress, repeat: int) -> list[CellResult]:
    jobs = make_jobs(bench, cell.workload, cell.rate, count, seed)
    variants = bench.config.variants()
    # The server alone answers no requests: it replays generation calls (`bench.server.alone`).
    tick = progress(cell, count * sum(v.executor != SERVER_ALONE for v in variants))
    rows = await run_cell(cell, jobs, bench.runtime, bench.search, variants, tick)
    return [replace(with_bound(r, bench.rates), repeat=repeat) for r in rows]


def load_graphs(config: BenchConfig) -> dict[str, RAGraph]:
    from ragraph.dsl import load
    from ragraph.errors import ConfigError

    graphs = {}
    for name in config.workflows:
        path = Path(name) if name.endswith(".rag") else config.workflow_dir / f"{name}.rag"
        if not path.is_file():
            raise ConfigError("--workflows", f"{name}: no workflow file {path}")
        graphs[name] = load(path)
    return graphs
