"""`ragraph run FILE --input in.jsonl --output out.jsonl`: many requests at once, a progress bar,
one output line per input line (a failed request carries its error), and a summary table."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ragraph.cli.run_input import BadLine, read_requests, search_options
from ragraph.cli.run_output import Journal, Row, answered, replace_with
from ragraph.cli.run_single import engine_label, open_run
from ragraph.runtime.app import RunResult, execute, open_services
from ragraph.runtime.catalog import Catalog
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.outcome import Outcome
from ragraph.runtime.request import Request
from ragraph.runtime.trace import Tracer


async def run_file(catalog: Catalog, config: RuntimeConfig, args: argparse.Namespace,
                   console: Console, err: Console) -> int:
    # Refuses duplicate ids before any model; --k, --mode, --filter over each line's own.
    items = read_requests(args.input, args.limit, search_options(args))
    kept = _resumed(args.output, items, err) if args.resume else _fresh(args.output, err)
    todo = [r for r in items if isinstance(r, Request) and r.id not in kept]
    bad = [r for r in items if isinstance(r, BadLine)]
    journal = Journal(args.output, kept.values()) if args.output is not None else None
    try:
        for line in bad:
            _record(journal, line.to_json())
        result = await _answer(catalog, config, todo, args, err, journal) if todo else None
    finally:
        if journal is not None:
            journal.close()
    rows = _in_input_order(items, kept, result)
    if args.output is not None:
        replace_with(args.output, rows)
        err.print(f"wrote {len(rows)} lines to {args.output} (in input order)")
    if result is None:
        err.print(f"nothing left to run: {len(kept)} of {len(items)} already answered"
                  + (f", {len(bad)} bad input lines" if bad else ""))
    else:
        console.print(summary_table(result, config, len(bad)))
    failed = sum("error" in row for row in rows)
    return 1 if failed == len(items) and items else 0


def _resumed(output: Path, items: list[Request | BadLine], err: Console) -> dict[str, Row]:
    questions = {i.id: i.question if isinstance(i, Request) else None for i in items}
    kept = answered(output, questions)
    err.print(f"[dim]--resume: {len(kept)} of {len(items)} already answered in {output}; "
              "running the rest[/dim]")
    return kept


def _fresh(output: Path | None, err: Console) -> dict[str, Row]:
    if output is not None and output.is_file() and output.stat().st_size:
        err.print(f"[dim]{output} exists: starting it anew (--resume keeps its answers)[/dim]")
    return {}


async def _answer(catalog: Catalog, config: RuntimeConfig, requests: list[Request],
                  args: argparse.Namespace, err: Console, journal: Journal | None) -> RunResult:
    scheduler, scale = config.scheduler, config.scale
    err.print(f"[dim]{len(requests)} requests · workflow {catalog.default} · executor "
              f"{scheduler.executor} {scheduler.passes} · engine {engine_label(config)} · "
              f"{config.describe_threads()}"
              + (f" · index on {scale.shards} Ray shards at {scale.ray}" if scale.ray else "")
              + f"\n{config.gpu.describe()}[/dim]")
    search = await open_run(config, err)
    tracer = Tracer()

    def done(outcome: Outcome) -> None:
        _record(journal, outcome.to_json())
        bar.advance(task)

    columns = (TextColumn("answering"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task("run", total=len(requests))
        async with open_services(config, search, tracer) as services:
            result = await execute(catalog, requests, config, services, done)
    if args.trace:
        tracer.write(args.trace)
        err.print(f"trace written to {args.trace}")
    return result


def _record(journal: Journal | None, row: Row) -> None:
    if journal is not None:
        journal.append(row)


def _in_input_order(items: list[Request | BadLine], kept: dict[str, Row],
                    result: RunResult | None) -> list[Row]:
    by_id = dict(kept)
    by_id.update((o.rid, o.to_json()) for o in (result.outcomes if result else ()))
    return [b.to_json() if isinstance(b, BadLine) else by_id[b.id] for b in items]


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
        ("speculation", st.describe_speculation()),
        ("accelerator cache hit rate", _rate(st.cache_hit_rate) if config.gpu.hot_cache
         else f"off ({config.gpu.hot_cache_why})"),
        ("clusters searched", f"{st.clusters_searched} in {st.search_steps} steps"),
    ]
    rows += _quality(result.outcomes)
    if config.scale.ray is not None or config.llm.replicas:
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
