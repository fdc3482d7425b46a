"""`ragraph bench --target URL`: the HTTP load generator's runs and its table."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ragraph.bench.data.questions import load_questions
from ragraph.bench.run.http_load import LoadReport, LoadSpec, drive, workflows_of
from ragraph.runtime.request import Request


def requests_for(workflows: Sequence[str], count: int, data: Path | None,
                 seed: int) -> list[Request]:
    """`count` requests, the workflows in turn, each with its kind of question (single- or
    multi-hop) from the bench's question pool."""
    pool = load_questions(data)
    out = []
    for i in range(count):
        workflow = workflows[i % len(workflows)]
        question, answers = pool.for_workflow(workflow)[(seed + i) % len(
            pool.for_workflow(workflow))]
        out.append(Request(id=f"{workflow}-{i}", question=question, golden_answers=answers,
                           workflow=workflow))
    return out


def run_target(spec: LoadSpec, workflows: Sequence[str] | None, rates: Sequence[float] | None,
               data: Path | None, console: Console) -> list[LoadReport]:
    """One closed-loop run at `spec.clients`, or one open-loop run per rate."""
    names = tuple(workflows or asyncio.run(workflows_of(spec)))
    requests = requests_for(names, spec.requests, data, spec.seed)
    specs = [spec] if not rates else [replace(spec, rate=r) for r in rates]
    reports = []
    for one in specs:
        what = (f"{one.clients} clients, closed loop" if one.rate is None
                else f"Poisson arrivals at {one.rate:g} req/s")
        console.print(f"[dim]{one.requests} requests to {one.target} ({', '.join(names)}), "
                      f"{what}, {one.stream_share:.0%} streaming[/dim]")
        reports.append(asyncio.run(drive(one, requests)))
    console.print(load_table(reports))
    return reports


def load_table(reports: Sequence[LoadReport]) -> Table:
    table = Table(title="through the server (as its clients saw it)")
    for column in ("load", "answered", "throughput req/s", "latency p50 / p95 / p99 s",
                   "first token p50 s", "errors"):
        table.add_column(column, justify="right")
    for r in reports:
        load = f"{r.spec.clients} clients" if r.spec.rate is None else f"{r.spec.rate:g} req/s"
        errors = ", ".join(f"{n}x {code}" for code, n in sorted(r.errors().items())) or "none"
        table.add_row(load, f"{len(r.ok)}/{len(r.shots)}", f"{r.throughput_rps:.2f}",
                      " / ".join(_s(r.latency(q)) for q in (50, 95, 99)), _s(r.first_token(50)),
                      errors)
    return table


def _s(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"
