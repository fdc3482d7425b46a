"""`ragraph run FILE --input in.jsonl --output out.jsonl`: many requests at once, a progress bar,
one output line per input line (a failed request carries its error), and a summary table."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ragraph.cli.run_input import BadLine, read_requests
from ragraph.cli.run_single import engine_label, open_run
from ragraph.runtime.app import RunResult
from ragraph.runtime.catalog import Catalog
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.outcome import Outcome
from ragraph.runtime.trace import Tracer


async def run_file(catalog: Catalog, config: RuntimeConfig, args: argparse.Namespace,
                   console: Console, err: Console) -> int:
    from ragraph.runtime.app import execute, open_services

    items = read_requests(args.input, args.limit)
    requests = [r for r in items if not isinstance(r, BadLine)]
    bad = [r for r in items if isinstance(r, BadLine)]
    err.print(f"[dim]{len(requests)} requests · workflow {catalog.default} · executor "
              f"{config.executor} {config.passes} · engine {engine_label(config)} · "
              f"{config.describe_threads()}"
              + (f" · index on {config.shards} Ray shards at {config.ray}" if config.ray else "")
              + f"\n{config.gpu.describe()}[/dim]")
    search = await open_run(config, err)
    tracer = Tracer()
    columns = (TextColumn("answering"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task("run", total=len(requests))
        async with open_services(config, search, tracer) as services:
            result = await execute(catalog, requests, config, services,
                                   on_done=lambda _: bar.advance(task))
    by_id = {o.rid: o for o in result.outcomes}
    rows = [b.to_json() if isinstance(b, BadLine) else by_id[b.id].to_json() for b in items]
    if args.output is not None:
        write_jsonl(args.output, rows)
        err.print(f"wrote {len(rows)} lines to {args.output}")
    if args.trace:
        tracer.write(args.trace)
        err.print(f"trace written to {args.trace}")
    console.print(summary_table(result, config, len(bad)))
    failed = sum(o.error is not None for o in result.outcomes) + len(bad)
    return 1 if failed == len(items) and items else 0


def summary_table(result: RunResult, config: RuntimeConfig, bad_lines: int = 0) -> Table:
    s, st = result.summary, result.stats
    table = Table(title=f"{result.executor} · {engine_label(config)}", show_header=False)
    table.add_column(style="bold")
    table.add_column(justify="right")
    rows = [
        ("requests", f"{s.requests + bad_lines} ({s.errors} failed"
         + (f", {bad_lines} bad input lines)" if bad_lines else ")")),
        ("throughput", f"{s.throughput_rps:.2f} req/s over {s.wall_s:.1f} s"),
        ("latency p50 / p95 / p99", f"{s.p50_s:.2f} / {s.p95_s:.2f} / {s.p99_s:.2f} s"),
        ("time to first token p50", "–" if s.ttft_p50_s is None else f"{s.ttft_p50_s:.2f} s"),
        ("speculation hit rate", _rate(st.speculation_hit_rate) + f" ({st.speculations} started, "
         f"{st.rollbacks} rolled back)"),
        ("accelerator cache hit rate", _rate(st.cache_hit_rate) if config.gpu.hot_cache
         else f"off ({config.gpu.hot_cache_why})"),
        ("clusters searched", f"{st.clusters_searched} in {st.search_steps} steps"),
    ]
    rows += _quality(result.outcomes)
    if config.ray is not None or config.replicas:
        rows += _retries(result)
    for name, value in rows:
        table.add_row(name, value)
    return table


def _retries(result: RunResult) -> list[tuple[str, str]]:
    """Every retry on its own line: a fault survived is still a fault to know about."""
    head = ("retries", f"{len(result.faults)}" if result.faults else "none")
    return [head] + [(f"  retry {i}", str(f)) for i, f in enumerate(result.faults, start=1)]


def _rate(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def _quality(outcomes: tuple[Outcome, ...]) -> list[tuple[str, str]]:
    from ragraph.eval.metrics import exact_match, f1_score, substring_match

    scored = [o for o in outcomes if o.golden_answers]
    if not scored:
        return []
    answers = [(o.answer or "", o.golden_answers) for o in scored]
    em = sum(exact_match(a, g) for a, g in answers) / len(answers)
    f1 = sum(f1_score(a, g) for a, g in answers) / len(answers)
    acc = sum(substring_match(a, g) for a, g in answers) / len(answers)
    return [("EM / F1 / substring-EM", f"{em:.1%} / {f1:.1%} / {acc:.1%} (n={len(answers)})")]


def write_jsonl(path: Path, rows) -> None:
    with path.open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
