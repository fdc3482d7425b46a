"""The online ablation (`ragraph bench --ablation --rates ... --no-offline`): how the command line
reads, and a tiny run on the simulated engine whose CSV has one `online` row per variant and
rate, with speculation's counts, beside its tables and its latency-against-rate plot."""

from __future__ import annotations

import argparse
import asyncio
import csv
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from ragraph.bench.data.index import IndexSpec, ensure_bench_index
from ragraph.bench.data.questions import load_questions
from ragraph.bench.output import plots, report
from ragraph.bench.output.online_ablation import highest_rate_within, latency_table, rate_points
from ragraph.bench.output.results import write_csv
from ragraph.bench.run.cells import Cell, CellResult
from ragraph.bench.run.config import BenchConfig
from ragraph.bench.run.session import Workbench, run_cells
from ragraph.cli import cmd_bench
from ragraph.errors import ConfigError
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.retrieval.manifest import load_index
from ragraph.runtime.search_service import SearchService
from tests.runtime import workflows
from tests.runtime.fakes import HashEmbedder

from .helpers import summary, toy_base

CHOSEN = ("-O0", "-O2 -speculate", "-O2", "sequential")


def parsed(*argv: str) -> BenchConfig:
    parser = argparse.ArgumentParser()
    cmd_bench.register(parser.add_subparsers())
    return cmd_bench.config_from(parser.parse_args(["bench", *argv]))


def test_ablation_with_rates_and_no_offline_is_the_online_ablation():
    config = parsed("--ablation", "--rates", "1.5,3", "--no-offline",
                    "--variants=-O0,-O2,-O2 -speculate,sequential")
    assert config.ablation and not config.offline and config.rates == (1.5, 3.0)
    assert config.workflows == ("oneshot", "hyde", "multistep", "irg")  # HedraRAG's
    assert [v.label for v in config.variants()] == list(CHOSEN)  # the ablation's order
    everything = [v.label for v in parsed("--ablation", "--rates", "2").variants()]
    # Every pass alone and left out of -O2, then the baselines beside them.
    assert everything[0] == "-O0" and everything[-3:] == ["-O2", "sequential", "stage-batched"]
    assert len(everything) == 14 + 2
    assert parsed("--ablation").rates == ()  # offline only without --rates


@pytest.mark.parametrize("argv, field", [
    (("--ablation", "--variants=-O3"), "--variants"),
    (("--variants=-O2", "--rates", "2"), "--variants"),  # without --ablation
    (("--ablation", "--no-offline"), "--rates"),
])
def test_bad_ablation_flags_name_the_flag(argv, field):
    with pytest.raises(ConfigError) as err:
        parsed(*argv)
    assert err.value.field == field


def test_online_ablation_writes_a_row_per_variant_and_rate_with_speculation_counts(tmp_path: Path):
    base = toy_base(300)
    info = ensure_bench_index(tmp_path / "cache", base, IndexSpec(scale=3000))
    loaded = load_index(Path(info.directory))
    search = SearchService(loaded.engine, HashEmbedder(), loaded.store, nprobe=8)
    config = BenchConfig(workflows=("irg",), nprobes=(8,), offline=False, rates=(10.0, 20.0),
                         window_s=0.4, concurrencies=(4,), data=None, out=tmp_path,
                         ablation=True, mix=False, variants_chosen=CHOSEN)
    bench = Workbench(config, {"irg": workflows.irg()}, load_questions(None), search,
                      RuntimeConfig.of(engine="sim", concurrency=4))
    rows = asyncio.run(run_cells(bench, lambda cell, total: lambda _outcome: None))
    assert [(r.cell.rate, r.executor) for r in rows] == [(rate, v) for rate in (10.0, 20.0)
                                                         for v in CHOSEN]
    assert all(r.summary.errors == 0 and r.agree in (None, 1.0) for r in rows)  # the same answers
    write_csv(tmp_path / "bench.csv", rows, {"caption": "test"})
    with (tmp_path / "bench.csv").open(encoding="utf-8") as handle:
        written = list(csv.DictReader(handle))
    assert {w["mode"] for w in written} == {"online"}
    assert [(float(w["rate_rps"]), w["executor"]) for w in written] == \
        [(r.cell.rate, r.executor) for r in rows]
    for w in written:  # speculation's settlement, per run
        assert int(w["speculations"]) >= int(w["speculation_adopted"]) + int(w["rollbacks"])
        assert int(w["rollback_tokens"]) >= 0 and int(w["warm_searches"]) >= 0
        assert int(w["speculations_held_back"]) >= 0
        # The search latency, from the traces: ragraph's search side says where it went (the
        # parts add up to it); the thread pool's search is one call.
        assert float(w["search_mean_s"]) > 0 and int(w["search_count"]) >= 1
        assert float(w["search_p95_s"]) >= float(w["search_p50_s"])
        if w["executor"] == "sequential":
            assert w["search_scan_s"] == "" and w["search_wait_s"] == ""
        else:
            parts = sum(float(w[f"search_{p}_s"]) for p in ("queue", "embed", "scan", "wait"))
            assert float(w["search_scan_s"]) > 0
            assert parts == pytest.approx(float(w["search_mean_s"]))
    console = Console(record=True, width=240)
    report.print_all(console, rows, config.slo_s, "sim", "caption", [], ablation=True)
    text = console.export_text()
    assert "Online ablation: latency against the arrival rate" in text
    assert "search mean s" in text and "search p95 s" in text
    assert "highest rate offered within the SLO" in text
    drawn = plots.latency_vs_rate(rows, tmp_path, "caption", config.slo_s, ablation=True)
    assert [p.name for p in drawn] == ["ablation_vs_rate_nprobe8.png"]


def run(variant: str, rate: float, mean: float, p95: float, started=0, adopted=0,
        errors=0) -> CellResult:
    return CellResult(Cell("irg", 256, rate), variant, "sim", True,
                      summary(10, errors, 1.0, rate, mean, p95, mean), None, started, None, 0.0,
                      speculation_adopted=adopted)


def test_rate_points_compare_with_O0_and_find_the_highest_rate_within_the_slo():
    rows = [run("-O0", 2.0, 2.0, 4.0), run("-O2", 2.0, 1.0, 2.0, started=10, adopted=8),
            run("-O0", 4.0, 8.0, 12.0), run("-O2", 4.0, 4.0, 9.0),
            run("-O2", 8.0, 5.0, 9.5, errors=1)]
    points = rate_points(rows)
    o2 = [p for p in points if p.variant == "-O2"]
    assert o2[0].vs_reference == pytest.approx(0.5) and o2[0].accuracy == pytest.approx(0.8)
    assert o2[1].accuracy is None  # none started
    assert o2[2].vs_reference is None  # -O0 did not run at 8/s
    best = highest_rate_within(points, slo_s=10.0)
    assert best[("irg", 256, "-O0")] == 2.0  # its p95 passed the SLO at 4/s
    assert best[("irg", 256, "-O2")] == 4.0  # a failed request disqualifies 8/s


def test_the_latency_table_shows_what_speculation_s_backoff_held_back():
    held = replace(run("-O2", 14.0, 1.0, 2.0, started=6, adopted=1), speculations_held_back=9)
    rows = [run("-O0", 14.0, 2.0, 4.0), held]
    assert [p.held_back for p in rate_points(rows)] == [0, 9]
    console = Console(record=True, width=240)
    console.print(latency_table(rows, 10.0, "caption"))
    header, o2 = [line for line in console.export_text().splitlines()
                  if "held back" in line or "-O2" in line]
    cells = [c.strip() for c in o2.split("│")]
    assert cells[[c.strip() for c in header.split("┃")].index("held back")] == "9"


def test_a_fixed_sub_stage_budget_reaches_every_run(tmp_path: Path):
    """--budget-ms (or a --config file's) forces split-stages' sub-stages, so the bench can
    measure the split where the adaptive rule would take whole steps."""
    assert parsed("--ablation", "--rates", "2", "--budget-ms", "15").run.scheduler.budget_ms == 15
    assert parsed("--ablation", "--rates", "2").run.scheduler.budget_ms is None  # adaptive
    path = tmp_path / "budget.toml"
    path.write_text("[scheduler]\nbudget_ms = 20\n", encoding="utf-8")
    assert parsed("--config", str(path)).run.scheduler.budget_ms == 20
    with pytest.raises(ConfigError) as err:
        parsed("--budget-ms", "0")
    assert err.value.field == "--budget-ms"
