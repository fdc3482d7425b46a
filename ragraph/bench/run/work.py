"""A run's measured work, as `bench.measure.bounds` prices it: the queries its executor embedded
(`bench.measure.counting`) and the counters its engines kept, and the least time it could take."""

from __future__ import annotations

from dataclasses import replace

from ragraph.bench.measure.bounds import Rates, Work, least_time
from ragraph.bench.run.cells import CellResult


def work_of(row: CellResult) -> Work:
    return Work(row.llm, queries=row.queries_embedded, vectors=row.vectors_scanned,
                query_tokens=row.query_tokens)


def with_bound(row: CellResult, rates: Rates | None) -> CellResult:
    """`row` with the least time its work could take at `rates` (None: not measured)."""
    if rates is None:
        return row
    return replace(row, bound=least_time(work_of(row), rates, row.cell.nprobe))


def with_least_bound(row: CellResult, rates: Rates) -> CellResult:
    """`row` with the lesser of its bound and its work's at `rates` (another probe of the same
    engines): the engines ran that fast at least once in the run, so neither probe's slower
    minutes are taken for ragraph's."""
    other = with_bound(row, rates)
    if row.bound is None or other.bound.total_s < row.bound.total_s:
        return other
    return row
