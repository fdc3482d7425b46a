"""A tiny bench on a toy padded index with the simulated engine: every executor runs every cell,
the tables carry the engine and the machine, and the plot file is written."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from rich.console import Console

from ragraph.bench.data.index import IndexSpec, ensure_bench_index
from ragraph.bench.data.questions import load_questions
from ragraph.bench.output import plots, report
from ragraph.bench.output.results import write_json
from ragraph.bench.run.config import BenchConfig
from ragraph.bench.run.driver import caption_for
from ragraph.bench.run.session import Workbench, run_cells
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.retrieval.manifest import load_index
from ragraph.runtime.search_service import SearchService
from tests.runtime import workflows
from tests.runtime.fakes import HashEmbedder

from .helpers import summary, toy_base


def test_tiny_bench_runs_all_executors_and_writes_tables_and_plots(tmp_path: Path):
    base = toy_base(300)
    info = ensure_bench_index(tmp_path / "cache", base, IndexSpec(scale=3000))
    loaded = load_index(Path(info.directory))
    search = SearchService(loaded.engine, HashEmbedder(), loaded.store, nprobe=8)
    config = BenchConfig(workflows=("hyde", "irg"), nprobes=(8,), offline_requests=6,
                         rates=(20.0,), window_s=0.4, concurrencies=(4,), data=None, out=tmp_path)
    runtime = RuntimeConfig.of(engine="sim", concurrency=4)
    graphs = {"hyde": workflows.hyde(), "irg": workflows.irg()}
    bench = Workbench(config, graphs, load_questions(None), search, runtime)
    done = []
    rows = asyncio.run(run_cells(bench, lambda cell, total: done.append))
    # hyde, irg and their mix; offline and one rate; three executors each.
    assert len(rows) == 3 * 2 * 3
    assert {r.executor for r in rows} == {"ragraph", "sequential", "stage-batched"}
    assert all(r.summary.errors == 0 and r.simulated for r in rows)
    assert len(done) == sum(r.summary.requests for r in rows)
    # Per-request retrieval spans exist for sequential and ragraph (stage-batched has batch spans).
    shares = [r.retrieval_share for r in rows if r.executor != "stage-batched"]
    assert all(s is not None and 0 < s < 1 for s in shares)
    # Measured, so a "CPU-bound" or "embedder-bound" verdict has evidence.
    assert all(0 < r.cpu_busy and 0 < r.embed_busy < 1 for r in rows)
    # What the LLM engine computed.
    assert all(r.llm.llm_tokens > 0 for r in rows)
    # How busy the simulated GPU was: its simulated seconds fit in the wall time.
    assert all(0 < r.engine_busy <= 1 for r in rows)
    assert all(r.hot_served is None for r in rows)  # no accelerator tier here
    caption = caption_for(config, info, rows[0].engine, rows[0].simulated)
    assert "SIMULATED" in caption and "cores" in caption and "SYNTHETIC" in caption
    assert "profile h100-llama-3.1-8b" in caption and "GPU paths: query embedder" in caption
    console = Console(record=True, width=200)
    report.print_all(console, rows, config.slo_s, "sim", caption, ["a note"])
    text = console.export_text()
    assert "thr vs seq" in text and "LLM busy" in text and "LLM tokens" in text and "SIMULATED" in text and "note: a note" in text
    # Bounds (issue 31): every run priced at the engines' rates probed before the first cell.
    assert all(r.bound is not None and 0 < r.bound.total_s for r in rows)
    assert all(r.queries_embedded > 0 for r in rows)
    assert all(r.vectors_scanned > 0 for r in rows if r.executor == "ragraph")
    assert "at bound" in text and "Bounds: the least time" in text and "note: bound:" in text
    write_json(tmp_path / "bench.json", rows, {"caption": caption})
    saved = json.loads((tmp_path / "bench.json").read_text())
    assert saved["rates"]["llm"]["prefill_tok_s"] > 0 and len(saved["runs"]) == len(rows)
    assert all(0 < run["bound_share"] and run["bound"]["total_s"] > 0 for run in saved["runs"])
    written = plots.latency_vs_rate(rows, tmp_path, caption, config.slo_s)
    assert [p.name for p in written] == ["latency_vs_rate_nprobe8.png"]
    assert written[0].stat().st_size > 10_000


def test_an_untimed_warm_up_runs_the_first_variant_before_the_first_cell(monkeypatch):
    from ragraph.bench.run import session

    calls = []

    async def record(cell, jobs, runtime, search, variants, on_done):
        calls.append((cell, sum(len(j.requests) for j in jobs), [v.label for v in variants]))
        return []

    monkeypatch.setattr(session, "run_cell", record)
    config = BenchConfig(workflows=("hyde", "irg"), nprobes=(8,), offline_requests=6, rates=(),
                         concurrencies=(4,), mix=False, data=None)
    graphs = {"hyde": workflows.hyde(), "irg": workflows.irg()}
    bench = Workbench(config, graphs, load_questions(None), None, RuntimeConfig.of(engine="sim"))
    rows = asyncio.run(run_cells(bench, lambda cell, total: lambda _o: None))
    assert rows == []
    warm, *cells = calls
    assert warm == (session.Cell("hyde", 8, None, 4), session.WARM_UP_REQUESTS,
                    ["ragraph"])
    assert [(c.workload, n) for c, n, _ in cells] == [("hyde", 6), ("irg", 6)]


def test_offline_rows_report_the_share_the_hot_cache_served(tmp_path: Path):
    import pytest

    pytest.importorskip("torch")
    from ragraph.bench.run.driver import _notes
    from ragraph.runtime.retrieval.tier.hotcache import HotCacheConfig, HotClusterCache
    from ragraph.runtime.retrieval.tier.tiered import TieredEngine

    info = ensure_bench_index(tmp_path / "cache", toy_base(300), IndexSpec(scale=3000))
    loaded = load_index(Path(info.directory))
    cache = HotClusterCache(loaded.engine, HotCacheConfig(capacity=loaded.engine.nlist // 2,
                                                          device="cpu"))
    search = SearchService(TieredEngine(loaded.engine, cache), HashEmbedder(), loaded.store,
                           nprobe=8)
    config = BenchConfig(workflows=("hyde",), nprobes=(8,), offline_requests=12, rates=(),
                         concurrencies=(4,), mix=False, data=None, out=tmp_path)
    bench = Workbench(config, {"hyde": workflows.hyde()}, load_questions(None), search,
                      RuntimeConfig.of(engine="sim", concurrency=4))
    rows = asyncio.run(run_cells(bench, lambda cell, total: lambda _o: None))
    cache.close()
    assert {r.executor for r in rows} == {"ragraph", "sequential", "stage-batched"}
    assert all(r.hot_served is not None and 0 <= r.hot_served <= 1 for r in rows)
    # The warm-up and the first executor's probes swap hot clusters in for the later ones.
    assert max(r.hot_served for r in rows) > 0
    note = next(n for n in _notes(config, rows) if n.startswith("hot-cluster cache"))
    assert "hyde nprobe 8 ragraph" in note and "% held)" in note
    assert all(r.hot_resident is not None and 0 <= r.hot_resident <= 1 for r in rows)
    assert max(r.hot_resident for r in rows) > 0


def test_offline_runs_at_every_concurrency_and_online_at_the_first(tmp_path: Path):
    base = toy_base(300)
    info = ensure_bench_index(tmp_path / "cache", base, IndexSpec(scale=3000))
    loaded = load_index(Path(info.directory))
    search = SearchService(loaded.engine, HashEmbedder(), loaded.store, nprobe=8)
    config = BenchConfig(workflows=("irg",), nprobes=(8,), offline_requests=4, rates=(20.0,),
                         window_s=0.2, concurrencies=(2, 4), mix=False, data=None,
                         executors=("ragraph",), out=tmp_path)
    bench = Workbench(config, {"irg": workflows.irg()}, load_questions(None), search,
                      RuntimeConfig.of(engine="sim", concurrency=2))
    rows = asyncio.run(run_cells(bench, lambda cell, total: lambda _: None))
    assert sorted((r.cell.rate, r.cell.concurrency) for r in rows if r.cell.rate is None) == \
        [(None, 2), (None, 4)]
    assert [(r.cell.rate, r.cell.concurrency) for r in rows if r.cell.rate] == [(20.0, 2)]


def test_a_bench_cut_short_keeps_the_cells_it_measured(tmp_path: Path, monkeypatch):
    """The CSV is written as each cell ends: a long run stopped midway (Ctrl-C, a lost
    machine) leaves what it measured."""
    import csv
    import io

    import pytest

    from ragraph.bench.run import driver
    from ragraph.bench.run.cells import Cell, CellResult

    info = ensure_bench_index(tmp_path / "cache", toy_base(300), IndexSpec(scale=3000))
    monkeypatch.setattr(driver, "prepare_index", lambda config, cache, bar: (info, []))
    monkeypatch.setattr(driver, "open_search", lambda runtime, embed_threads=None: None)

    async def two_cells_then_stop(bench, progress, cell_done):
        for rate in (None, 4.0):
            cell_done([CellResult(Cell("irg", 8, rate, 4), "ragraph", "sim", True,
                                  summary(10, 0, 1.0, 10.0, 0.5, 1.0, 0.6), None, 0, None, 0.0)])
        raise KeyboardInterrupt

    monkeypatch.setattr(driver, "run_cells", two_cells_then_stop)
    config = BenchConfig(workflows=("irg",), nprobes=(8,), concurrencies=(4,), data=None,
                         out=tmp_path / "out", workflow_dir=Path("workflows"))
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(driver.run(config, Console(file=io.StringIO())))
    with (tmp_path / "out" / "bench.csv").open() as handle:
        kept = list(csv.DictReader(handle))
    assert [(r["mode"], r["rate_rps"]) for r in kept] == [("offline", ""), ("online", "4.0")]
    assert (tmp_path / "out" / "latency_vs_rate_nprobe8.png").is_file()
