"""`ragraph bench --repeat N`: each (cell, executor)'s median run feeds the tables, ratios are
taken within a repeat, and the spread table says how far the runs moved."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from ragraph.bench.measure.bounds import Bound
from ragraph.bench.output import repeats
from ragraph.bench.run.cells import Cell, CellResult
from ragraph.bench.run.config import BenchConfig
from ragraph.errors import ConfigError

from .helpers import summary

OFFLINE = Cell("irg", 32, None, 8)


def run(executor: str, thr: float, repeat: int, cell: Cell = OFFLINE,
        bound_s: float | None = None) -> CellResult:
    r = CellResult(cell, executor, "llamacpp", False,
                   summary(10, 0, 10.0 / thr, thr, 1.0, 2.0, 1.0), None, 0, None, 0.0,
                   repeat=repeat)
    if bound_s is None:
        return r
    # Only the bound's time matters to a share.
    bound = Bound(prefill_s=bound_s, decode_s=0.0, embed_s=0.0, search_s=0.0, total_s=bound_s,
                  rates=None)  # type: ignore[arg-type]
    return replace(r, bound=bound)


def test_the_median_run_is_a_whole_run_the_lower_middle_of_an_even_count():
    runs = [run("ragraph", t, i) for i, t in enumerate((0.9, 0.7, 0.8))]
    assert repeats.median_run(runs).repeat == 2  # 0.8
    assert repeats.median_run(runs[:2]).summary.throughput_rps == 0.7


def test_medians_keep_one_run_per_cell_and_executor_in_the_order_they_ran():
    online = Cell("irg", 32, 0.5, 8)
    rows = [run("ragraph", 0.9, 0), run("langgraph", 0.5, 0), run("ragraph", 0.4, 0, online),
            run("ragraph", 0.7, 1), run("langgraph", 0.6, 1), run("ragraph", 0.45, 1, online),
            run("ragraph", 0.8, 2), run("langgraph", 0.4, 2), run("ragraph", 0.5, 2, online)]
    got = repeats.medians(rows)
    assert [(r.cell, r.executor, r.summary.throughput_rps) for r in got] == [
        (OFFLINE, "ragraph", 0.8), (OFFLINE, "langgraph", 0.5), (online, "ragraph", 0.45)]
    single = rows[:3]
    assert repeats.medians(single) == single


def test_ratios_are_taken_within_each_repeat_and_shares_over_the_runs():
    rows = [run("ragraph", 0.9, 0, bound_s=9.0), run("langgraph", 0.5, 0),
            run("ragraph", 0.7, 1, bound_s=9.0), run("langgraph", 0.7, 1),
            run("ragraph", 0.8, 2, bound_s=9.0), run("langgraph", 0.4, 2)]
    ours = next(s for s in repeats.spreads(rows, "langgraph") if s.executor == "ragraph")
    assert ours.runs == 3
    assert ours.rps == (0.7, 0.8, 0.9)
    # 0.9/0.5, 0.7/0.7, 0.8/0.4: the repeat pairs, not the ratio of the medians (0.8/0.5).
    assert ours.ratio == pytest.approx((1.0, 1.8, 2.0))
    # Bound 9 s over runs of 10/0.9, 10/0.7 and 10/0.8 s.
    assert ours.share == pytest.approx((0.63, 0.72, 0.81))
    theirs = next(s for s in repeats.spreads(rows, "langgraph") if s.executor == "langgraph")
    assert theirs.ratio is None and theirs.share is None


def test_the_spread_table_prints_median_and_range():
    rows = [run("ragraph", 0.9, 0, bound_s=9.0), run("langgraph", 0.5, 0),
            run("ragraph", 0.7, 1, bound_s=9.0), run("langgraph", 0.7, 1)]
    console = Console(record=True, width=200)
    console.print(repeats.spread_table(rows, "the caption"))
    text = console.export_text()
    assert "Over 2 repeats" in text and "thr vs langgraph" in text
    assert "0.70 (0.70-0.90)" in text  # ragraph's req/s: lower middle, then the range
    assert "63% (63%-81%)" in text and "1.00x (1.00x-1.80x)" in text


def test_the_spread_table_tells_apart_cells_that_differ_in_requests_in_flight():
    wider = Cell("irg", 32, None, 16)
    rows = [run("ragraph", 0.9, 0), run("ragraph", 0.6, 0, wider),
            run("ragraph", 0.7, 1), run("ragraph", 0.5, 1, wider)]
    console = Console(record=True, width=200)
    console.print(repeats.spread_table(rows, "c"))
    cells = [[c.strip() for c in line.split("│")[1:-1]]
             for line in console.export_text().splitlines() if "ragraph" in line]
    assert [(c[3], c[6]) for c in cells] == [("8", "0.70 (0.70-0.90)"), ("16", "0.50 (0.50-0.60)")]


def test_repeat_must_be_at_least_one():
    with pytest.raises(ConfigError) as err:
        BenchConfig(repeat=0)
    assert err.value.field == "--repeat"


def test_the_flag_reaches_the_config():
    from ragraph.cli import cmd_bench
    from ragraph.cli.main import build_parser

    args = build_parser().parse_args(["bench", "--engine", "sim", "--repeat", "3"])
    assert cmd_bench.config_from(args).repeat == 3


def test_a_repeated_bench_runs_every_cell_again_at_the_first_repeats_rates(tmp_path: Path):
    from ragraph.bench.data.index import IndexSpec, ensure_bench_index
    from ragraph.bench.data.questions import load_questions
    from ragraph.bench.run.session import Workbench, run_cells
    from ragraph.runtime.config import RuntimeConfig
    from ragraph.runtime.retrieval.manifest import load_index
    from ragraph.runtime.search_service import SearchService
    from tests.runtime import workflows
    from tests.runtime.fakes import HashEmbedder

    from .helpers import toy_base

    info = ensure_bench_index(tmp_path / "cache", toy_base(300), IndexSpec(scale=3000))
    loaded = load_index(Path(info.directory))
    search = SearchService(loaded.engine, HashEmbedder(), loaded.store, nprobe=8)
    config = BenchConfig(workflows=("irg",), nprobes=(8,), offline_requests=4, rate_points=1,
                         window_s=0.2, concurrencies=(4,), mix=False, data=None,
                         executors=("ragraph", "sequential"), out=tmp_path, repeat=2)
    bench = Workbench(config, {"irg": workflows.irg()}, load_questions(None), search,
                      RuntimeConfig.of(engine="sim", concurrency=4))
    rows = asyncio.run(run_cells(bench, lambda cell, total: lambda _: None))
    assert [(r.repeat, r.cell.mode, r.executor) for r in rows] == [
        (rep, mode, ex) for rep in (0, 1) for mode in ("offline", "online")
        for ex in ("ragraph", "sequential")]
    # The online rate the first repeat chose is the one offered again.
    online = {r.cell for r in rows if r.cell.rate is not None}
    assert len(online) == 1
    assert len(repeats.medians(rows)) == 4


def test_the_driver_prints_medians_then_the_spread_then_each_cells_note_once(tmp_path: Path,
                                                                            monkeypatch):
    import io

    from ragraph.bench.data.index import IndexSpec, ensure_bench_index
    from ragraph.bench.run import driver

    from .helpers import toy_base

    info = ensure_bench_index(tmp_path / "cache", toy_base(300), IndexSpec(scale=3000))
    monkeypatch.setattr(driver, "prepare_index", lambda config, cache, bar: (info, []))
    monkeypatch.setattr(driver, "open_search", lambda runtime, embed_threads=None: None)
    rows = [replace(run(ex, thr, rep), engine="sim", simulated=True, top_docs_share=0.05)
            for rep, (ours, theirs) in enumerate(((0.9, 0.5), (0.7, 0.6)))
            for ex, thr in (("ragraph", ours), ("sequential", theirs))]

    async def cells(bench, progress, cell_done):
        cell_done(rows)
        return rows

    monkeypatch.setattr(driver, "run_cells", cells)
    config = BenchConfig(workflows=("irg",), nprobes=(32,), concurrencies=(8,), data=None,
                         out=tmp_path / "out", workflow_dir=Path("workflows"), repeat=2,
                         plots=False)
    out = io.StringIO()
    asyncio.run(driver.run(config, Console(file=out, width=200)))
    text = out.getvalue()
    spread = text.index("Over 2 repeats")
    assert text.index("Latency and throughput") < spread < text.index("note: latency")
    # The first table's ragraph row is its median run (0.7 req/s: the lower middle of two).
    first = text[text.index("Latency and throughput"):spread]
    assert "0.70" in first and "0.90" not in first
    popularity = next(line for line in text.splitlines() if "document popularity" in line)
    assert popularity.count("irg offline") == 1
    assert "run 2 ragraph" in text  # each cell's log line says which repeat it was


def test_repeat_with_a_target_or_ray_is_an_error_naming_the_flag(capsys):
    from ragraph.cli.main import main

    for extra in (["--target", "http://127.0.0.1:9"], ["--ray", "local"]):
        assert main(["bench", "--repeat", "2", *extra]) != 0
        assert "--repeat" in capsys.readouterr().err
