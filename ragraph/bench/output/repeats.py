"""A bench run repeated (`--repeat N`): every cell run N times in turn, the tables read each
executor's median run of a cell, and a table of the spread says how far the runs moved.

On a shared 2-core VM the same cell's share of its bound moved by ten points between
consecutive quiet runs (docs/benchmarks/embedded.md), so one run cannot tell 85% from 90%; the
median of several can, and the spread says whether it does."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from rich.table import Table

from ragraph.bench.output.results import baselines_in, ratio
from ragraph.bench.run.cells import Cell, CellResult

RunKey = tuple[Cell, str]  # a cell and an executor
T = TypeVar("T")


def _key(r: CellResult) -> RunKey:
    return r.cell, r.executor


def runs_by_key(rows: Sequence[CellResult]) -> dict[RunKey, list[CellResult]]:
    """Each (cell, executor)'s runs, in the order the cells first ran."""
    out: dict[RunKey, list[CellResult]] = {}
    for r in rows:
        out.setdefault(_key(r), []).append(r)
    return out


def _middle(ordered: Sequence[T]) -> T:
    """The median of a sorted sequence, the lower middle one of an even count: an element, so
    a median run is a whole run."""
    return ordered[(len(ordered) - 1) // 2]


def median_run(runs: Sequence[CellResult]) -> CellResult:
    """The run of median throughput: a whole run, so its latencies, counters and bound stay
    those of one run."""
    return _middle(sorted(runs, key=lambda r: r.summary.throughput_rps))


def medians(rows: Sequence[CellResult]) -> list[CellResult]:
    """Each (cell, executor)'s median run, the cells in the order they ran; rows of a single
    run come back as they are."""
    return [median_run(runs) for runs in runs_by_key(rows).values()]


@dataclass(frozen=True)
class Spread:
    """How one (cell, executor) moved over the repeats: medians and ranges."""

    cell: Cell
    executor: str
    runs: int
    rps: tuple[float, float, float]  # min, median, max
    share: tuple[float, float, float] | None  # of the bound; None: not measured
    # vs the cell's first baseline, repeat by repeat (both ran back to back in one repeat)
    ratio: tuple[float, float, float] | None = None


def _range(values: Sequence[float]) -> tuple[float, float, float] | None:
    """min, median, max; the median as `median_run` takes it, so the spread's median is what
    the other tables show."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[0], _middle(ordered), ordered[-1]


def spreads(rows: Sequence[CellResult], baseline: str) -> list[Spread]:
    """Every (cell, executor)'s spread over the repeats; ragraph's ratio to `baseline` is taken
    within each repeat, where the two ran minutes apart on the same machine."""
    by_key = runs_by_key(rows)
    theirs = {(r.cell, r.repeat): r.summary.throughput_rps for r in rows if r.executor == baseline}
    out = []
    for (cell, executor), runs in by_key.items():
        shares = [r.bound_share for r in runs if r.bound_share is not None]
        rps = [r.summary.throughput_rps for r in runs]
        ratios = [x for r, mine in zip(runs, rps, strict=True) if executor != baseline
                  and (x := ratio(mine, theirs.get((cell, r.repeat)))) is not None]
        out.append(Spread(cell, executor, len(runs), _range(rps),  # type: ignore[arg-type]
                          _range(shares), _range(ratios)))
    return out


def _mid(values: tuple[float, float, float] | None, fmt: str) -> str:
    if values is None:
        return "-"
    lo, mid, hi = values
    return f"{fmt.format(mid)} ({fmt.format(lo)}-{fmt.format(hi)})"


def spread_table(rows: Sequence[CellResult], caption: str) -> Table:
    """Median and range over the repeats, per cell and executor; ratios to the first baseline
    that ran."""
    repeats = 1 + max((r.repeat for r in rows), default=0)
    baseline = next(iter(baselines_in(rows)), None)
    vs = f"thr vs {baseline}" if baseline is not None else None
    table = Table(title=f"Over {repeats} repeats of every cell: median (min-max); the other "
                  "tables read each executor's median run", caption=caption)
    for col in ("workload", "nprobe", "load", "conc", "executor", "runs", "req/s", "at bound",
                *([vs] if vs else [])):
        table.add_column(col, justify="left" if col in ("workload", "executor", "load")
                         else "right")
    for s in spreads(rows, baseline or ""):
        load = "offline" if s.cell.rate is None else f"{s.cell.rate:.2f}/s"
        share = None if s.share is None else tuple(100 * x for x in s.share)
        table.add_row(s.cell.workload, str(s.cell.nprobe), load, str(s.cell.concurrency),
                      s.executor, str(s.runs),
                      _mid(s.rps, "{:.2f}"), _mid(share, "{:.0f}%"),  # type: ignore[arg-type]
                      *([_mid(s.ratio, "{:.2f}x")] if vs else []))
    return table
