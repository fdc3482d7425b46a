"""Driving a bench run with progress bars: prepare the index and questions, run the cells, write
the tables, the CSV and the plots."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from ragraph.bench.data.index import (
    BenchIndexInfo,
    IndexSpec,
    ensure_bench_index,
    index_dir_for,
    is_current,
)
from ragraph.bench.data.questions import load_questions
from ragraph.bench.data.realbase import cached_base, ensure_real_base
from ragraph.bench.measure import machine as M
from ragraph.bench.output import plots, repeats, report
from ragraph.bench.output.results import Target, write_csv, write_json
from ragraph.bench.run.cells import Cell, CellResult
from ragraph.bench.run.config import BenchConfig
from ragraph.bench.run.session import WARM_UP_REQUESTS, Workbench, load_graphs, run_cells
from ragraph.bench.server import stats as server_stats
from ragraph.console import new_console
from ragraph.runtime.app import open_search
from ragraph.runtime.llm.sim.engine import SimConfig


@dataclass(frozen=True)
class BenchReport:
    rows: tuple
    targets: tuple[Target, ...]
    csv: Path
    plots: tuple[Path, ...]
    caption: str
    seconds: float


def bench_cache(root: Path | None = None) -> Path:
    from ragraph.runtime.retrieval.build.corpus import cache_root

    return (root or cache_root()) / "bench"


@contextlib.contextmanager
def progress_bars(console: Console) -> Iterator[Progress]:
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=False) as bar:
        yield bar


def prepare_index(config: BenchConfig, cache: Path, bar: Progress) -> tuple[BenchIndexInfo, list]:
    def start(label: str, total: int) -> Callable[[int], None]:
        task = bar.add_task(label, total=total)
        if not bar.console.is_terminal:
            # Bars are drawn only on a terminal: in a log, a line as each stage starts says
            # where a run that was stopped spent its time (a build killed at its step's limit
            # on a lent GPU machine left only its command line).
            bar.console.log(f"{label}: {total:,}")
        return lambda n: bar.advance(task, n)

    base = ensure_real_base(config.data, cache, start, embed=not config.quick)
    info = ensure_bench_index(cache, base, _spec(config), start)
    return info, list(base.notes)


def _spec(config: BenchConfig) -> IndexSpec:
    return IndexSpec(config.scale, config.nlist, config.seed)


def index_ready(config: BenchConfig, cache: Path) -> bool:
    """Whether the index a run of `config` uses is built already, its real base and the default
    index included (so preparing it builds nothing)."""
    base = cached_base(config.data, cache, embed=not config.quick)
    return base is not None and is_current(index_dir_for(cache, *base, _spec(config)))


def build_apart(config: BenchConfig,
                build: Callable[[BenchConfig], None] | None = None) -> None:
    """Build the index a run of `config` uses in a process of its own (a fresh interpreter), so
    the cells are timed in a process that built nothing: on a fresh GPU machine the run in the
    process that had just built the index was 35-40% slower than the runs after it, and on 2
    cores slower in four tries of six (docs/benchmarks/gpu.md). Its errors are raised here.
    `build`: what the process runs (a module-level function; tests pass their own), by default
    `prepare_index` under progress bars."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    from ragraph.errors import RagraphError

    try:
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            pool.submit(build or _build_here, config).result()
    except BrokenProcessPool as err:
        raise RagraphError("the process building the bench index ended without finishing "
                           "(killed, or out of memory?); nothing was timed") from err


def _build_here(config: BenchConfig) -> None:
    with progress_bars(new_console(highlight=False)) as bar:
        prepare_index(config, bench_cache(), bar)


def build_index(config: BenchConfig, console: Console) -> BenchIndexInfo:
    """Build (or find) the index a run of `config` would use, and stop there. A timed run in a
    process of its own then shares neither its process nor its first minutes with the build: on
    a fresh GPU machine the run in the process that had just built the index was 35-40% slower
    than the runs after it (docs/benchmarks/gpu.md)."""
    with progress_bars(console) as bar:
        info, notes = prepare_index(config, bench_cache(), bar)
    for note in notes:
        console.print(f"note: {note}")
    return info


def caption_for(config: BenchConfig, info: BenchIndexInfo, engine: str, simulated: bool) -> str:
    url = config.run.llm.url
    label = M.engine_label(config.run.llm.engine, engine, simulated)
    if url is not None:
        label += f" on {server_stats.describe(url, config.api_key)}"
    runtime = config.runtime()
    return (f"engine: {label} | machine: {M.detect().describe()} | index: {info.real:,} real + "
            f"{info.synthetic:,} SYNTHETIC vectors, IVF{info.nlist} | concurrency "
            f"{', '.join(map(str, config.concurrencies))} | threads: gen "
            f"{runtime.llm.gen_threads}, search {runtime.search.search_threads} | "
            f"{runtime.gpu.describe()}"
            + ("" if config.traffic.alpha is None else f" | traffic {config.traffic}"))


async def run(config: BenchConfig, console: Console) -> BenchReport:
    started = time.perf_counter()
    if config.run.llm.engine == "sim":
        SimConfig.of(config.runtime().llm)  # a bad --profile fails before the index is built
    server_notes = check_server(config)  # a server that cannot be measured fairly fails here
    with progress_bars(console) as bar:
        info, notes = prepare_index(config, bench_cache(), bar)
        runtime = config.runtime(info.directory)
        # One torch thread: a query is a few tokens, and a second OpenMP thread only spins
        # against faiss and the LLM for the 2 cores (measured: 100 ms vs 800 ms per query on a
        # loaded VM).
        search = open_search(runtime, embed_threads=1)
        questions = load_questions(config.data)
        bench = Workbench(config, load_graphs(config), questions, search, runtime)

        def cell_progress(cell: Cell, total: int):
            load = "offline" if cell.rate is None else f"{cell.rate:.2f} req/s"
            task = bar.add_task(f"{cell.workload} nprobe {cell.nprobe} {load} "
                                f"c{cell.concurrency}", total=total)
            return lambda _outcome: bar.advance(task, 1)

        done: list[CellResult] = []
        caption, csv_path, written = "", config.out / "bench.csv", []

        def cell_done(cell_rows) -> None:
            # One line per cell as it ends, so a long run shows its numbers in logs too, and
            # the CSV (and plots) so far: a run cut short keeps what it measured. Every row
            # passes here, so the last call wrote the finished run's files.
            nonlocal caption, csv_path, written
            done.extend(cell_rows)
            caption = caption or caption_for(config, info, done[0].engine, done[0].simulated)
            csv_path, written = _write(config, done, caption)
            for r in cell_rows:
                load = "offline" if r.cell.rate is None else f"{r.cell.rate:.2f}/s"
                run = f" run {r.repeat + 1}" if config.repeat > 1 else ""
                bar.console.log(f"{r.cell.workload} nprobe {r.cell.nprobe} {load} "
                                f"c{r.cell.concurrency}{run} {r.executor}: "
                                f"p50 {r.summary.p50_s:.2f} s, p95 {r.summary.p95_s:.2f} s, "
                                f"{r.summary.throughput_rps:.2f} req/s, {r.summary.errors} errors")

        rows = await run_cells(bench, cell_progress, cell_done)
    medians = repeats.medians(rows)
    notes += server_notes + list(questions.notes) + _notes(config, medians) + _scan_note(search)
    spread = [repeats.spread_table(rows, caption)] if config.repeat > 1 else []
    found = report.print_all(console, medians, config.slo_s, config.run.llm.engine, caption, notes,
                             config.ablation, repeats=config.traffic.alpha is not None,
                             last=spread)
    # Written again whole: the second probe may have lowered bounds, and with no cell run the
    # CSV still says so.
    csv_path, written = _write(config, rows, caption)
    console.print(f"wrote {csv_path}, {config.out / 'bench.json'}"
                  + "".join(f", {p}" for p in written))
    return BenchReport(tuple(rows), tuple(found), csv_path, tuple(written), caption,
                       time.perf_counter() - started)


def _scan_note(search) -> list[str]:  # noqa: ANN001 - SearchService
    """How this machine's steps scan shared lists, where the engine timed it (a search served
    elsewhere has no rule here)."""
    rule = getattr(search, "list_rule", None)
    if rule is None or rule.trial is None:
        return []
    return [rule.trial.describe(rule.min_sharing)]


def check_server(config: BenchConfig) -> list[str]:
    """On --engine openai: a llama-server whose slots the bench can empty between runs and
    that keeps no RAM prompt cache (ConfigError otherwise); notes on what the bench does."""
    url = config.run.llm.url
    if url is None:
        return []
    key = config.api_key
    slots = server_stats.slot_count(url, api_key=key)
    if slots is None:
        return [f"{url} is not a llama-server (no total_slots in /props): its caches are "
                "not emptied between runs, its own counters are not read"]
    server_stats.check_no_prompt_cache(url, slots, api_key=key)
    notes = [f"every run starts on empty slots (all {slots} erased before it, and no RAM prompt "
             "cache); 'server alone' is the LangGraph app's generation calls replayed straight "
             "to the server, each app thread's calls in their order, with nothing between them: "
             "the app's server work alone (its latencies are per call, not per request)"]
    if server_stats.read_counters(url, api_key=key) is None:
        notes.append("the server has no /metrics (start it with --metrics): its work per run is "
                     "not reported")
    return notes


def _write(config: BenchConfig, rows, caption: str) -> tuple[Path, list[Path]]:
    """The CSV, the JSON (with each run's bound) and, where asked, the latency-vs-rate plots
    of `rows`."""
    csv_path = config.out / "bench.csv"
    context = {"traffic": str(config.traffic), "caption": caption}
    write_csv(csv_path, rows, context)
    write_json(config.out / "bench.json", rows, context)
    written = (plots.latency_vs_rate(repeats.medians(rows), config.out, caption, config.slo_s,
                                     ablation=config.ablation)
               if config.plots else [])
    return csv_path, written


def _notes(config: BenchConfig, rows) -> list[str]:
    out = ["latency = arrival to answer (queueing included); throughput = requests / wall time",
           "max throughput within the SLO: the highest measured req/s (completed / wall) among runs "
           "whose p95 latency <= the SLO (p95, not the mean)"]
    out.append(f"before the first cell, {WARM_UP_REQUESTS} untimed requests on its first variant "
               "(first use of the embedder, the index and the model)")
    share = max((r.synthetic_share for r in rows), default=0.0)
    out.append(f"synthetic passages reached at most {share * 100:.1f}% of the final top-k "
               "(they are flagged, titled '(synthetic padding)', and have no text)")
    hot = [r for r in rows if r.hot_served is not None and r.cell.rate is None]
    if hot:
        share = config.runtime().search.hot_fraction
        out.append(f"hot-cluster cache ({share * 100:.0f}% of clusters resident, an eighth of "
                   "them for prefetches): share of the vectors scanned it served, offline, and "
                   "of the index's vectors it held at the end: " + "; ".join(
                       f"{r.cell.workload} nprobe {r.cell.nprobe} {r.executor} "
                       f"{r.hot_served * 100:.0f}% ({(r.hot_resident or 0) * 100:.0f}% held)"
                       for r in hot))
    out.append(report.popularity_note(rows, str(config.traffic)))
    if config.repeat > 1:
        out.append(f"--repeat {config.repeat}: every cell ran {config.repeat} times in turn, "
                   "the same requests each time; the tables read each executor's median run "
                   "(by req/s), but the last, which gives the range")
    if config.quick:
        out.append("--quick: small index and few requests; numbers are indicative only")
    return out
