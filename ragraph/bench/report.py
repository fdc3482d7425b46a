"""Rich tables of a bench run; every table is captioned with the engine and the machine."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby

from rich.console import Console
from rich.table import Table

from ragraph.bench import results as R
from ragraph.bench.cells import CellResult
from ragraph.bench.machine import detect


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


def _cell_key(r: CellResult) -> tuple[str, int, float]:
    return r.cell.workload, r.cell.nprobe, r.cell.rate or 0.0


def cells_table(rows: Sequence[CellResult], caption: str) -> Table:
    table = Table(title="Latency and throughput, side by side (ratios: ragraph vs baseline)",
                  caption=caption, show_lines=False)
    for col in ("workload", "nprobe", "load", "executor", "p50 s", "p95 s", "req/s",
                "thr vs seq", "thr vs stage", "p50 vs seq", "retrieval", "spec hit", "CPU",
                "embedder", "LLM tokens"):
        table.add_column(col, justify="left" if col in ("workload", "executor", "load") else "right")
    for _, group in groupby(rows, key=_cell_key):
        cell = list(group)
        for i, r in enumerate(cell):
            first = i == 0
            mine = r.executor == "ragraph"
            table.add_row(
                r.cell.workload if first else "", str(r.cell.nprobe) if first else "",
                ("offline" if r.cell.rate is None else f"{r.cell.rate:.2f}/s") if first else "",
                r.executor, f"{r.p50_s:.2f}", f"{r.p95_s:.2f}", f"{r.throughput_rps:.2f}",
                _x(R.throughput_ratio(cell, "sequential")) if mine else "",
                _x(R.throughput_ratio(cell, "stage-batched")) if mine else "",
                _x(R.latency_ratio(cell, "sequential")) if mine else "",
                _pct(r.retrieval_share),
                _pct(r.speculation_hit_rate) if mine else "",
                _pct(r.cpu_busy), _pct(r.embed_busy), f"{r.llm_tokens:,}",
                end_section=i == len(cell) - 1,
            )
    return table


def slo_table(points: Sequence[R.SloPoint], slo_s: float, caption: str) -> Table:
    table = Table(title=f"Max throughput within the SLO (p95 latency <= {slo_s:g} s)",
                  caption=caption)
    for col in ("workload", "nprobe", "executor", "req/s", "from", "ragraph vs it"):
        table.add_column(col, justify="right" if col in ("req/s", "ragraph vs it") else "left")
    for p in sorted(points, key=lambda p: (p.workload, p.nprobe, p.executor != "ragraph")):
        vs = "" if p.executor == "ragraph" else _x(R.slo_ratio(points, p.workload, p.nprobe,
                                                                p.executor))
        table.add_row(p.workload, str(p.nprobe), p.executor,
                      "none met" if p.rps is None else f"{p.rps:.2f}", p.source, vs)
    return table


def targets_table(targets: Sequence[R.Target], shares: dict[tuple[str, int], float],
                  busy: dict[tuple[str, int], R.Busy], caption: str) -> Table:
    table = Table(title="Targets (issue 7) and the retrieval share of sequential requests",
                  caption=caption)
    cores = detect().cores
    for col in ("workload", "nprobe", "vs", "target", "measured", "verdict",
                "retrieval share (least loaded run)",
                "why (when missed)"):
        table.add_column(col, overflow="fold")
    for t in targets:
        share = shares.get((t.workload, t.nprobe))
        regime = "" if share is None else (" (in 20-60%)" if 0.2 <= share <= 0.6 else
                                           " (OUTSIDE 20-60%)")
        table.add_row(t.workload, str(t.nprobe), t.baseline, f">= {t.want:.1f}x", _x(t.got),
                      t.verdict(), _pct(share) + regime,
                      R.why_missed(t, share, busy.get((t.workload, t.nprobe), {}), cores))
    return table


def print_all(console: Console, rows: Sequence[CellResult], slo_s: float, engine: str,
              caption: str, notes: Sequence[str]) -> list[R.Target]:
    console.print(cells_table(rows, caption))
    points = R.slo_points(rows, slo_s)
    console.print(slo_table(points, slo_s, caption))
    found = R.targets(points, engine, rows)
    if found:
        console.print(targets_table(found, R.sequential_retrieval_share(rows),
                                    R.offline_busy(rows), caption))
    for note in notes:
        console.print(f"note: {note}", highlight=False)
    return found
