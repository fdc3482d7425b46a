"""The online ablation in HedraRAG's form (its Fig. 12 and 17): per workflow and variant, request
latency against the Poisson arrival rate, the retrievals' search latency (its Fig. 16), the
highest rate within the SLO, and what speculation did there (its accuracy, adopted over started,
what its rollbacks cost, and the retrievals its backoff held back)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import groupby

from rich.table import Table

from ragraph.bench.measure.search_latency import SearchLatency
from ragraph.bench.run.cells import CellResult

REFERENCE = "-O0"  # what every variant's latency is compared with


@dataclass(frozen=True)
class RatePoint:
    """One variant at one offered rate."""

    workload: str
    nprobe: int
    rate: float
    variant: str
    mean_s: float
    p50_s: float
    p95_s: float
    vs_reference: float | None  # this mean over -O0's at the same rate (< 1 is faster)
    started: int
    adopted: int
    rolled_back: int
    discarded_tokens: int
    held_back: int  # retrievals that speculated on nothing while its accuracy was low
    warm_searches: int
    errors: int
    search: SearchLatency | None = None  # its retrievals' (None: none traced)

    @property
    def accuracy(self) -> float | None:
        """Speculation's accuracy: adopted over started (None: none started)."""
        return self.adopted / self.started if self.started else None


def rate_points(rows: Sequence[CellResult]) -> list[RatePoint]:
    """Every online run of `rows`, by workload, nprobe, rate, in the variants' order."""
    online = [r for r in rows if r.cell.rate is not None]
    reference = {_at(r): r.summary.mean_s for r in online if r.executor == REFERENCE}
    out = []
    for r in online:
        ref = reference.get(_at(r))
        out.append(RatePoint(r.cell.workload, r.cell.nprobe, r.cell.rate or 0.0, r.executor,
                             r.summary.mean_s, r.summary.p50_s, r.summary.p95_s,
                             r.summary.mean_s / ref if ref else None, r.speculations,
                             r.speculation_adopted, r.rollbacks, r.rollback_tokens,
                             r.speculations_held_back, r.warm_searches, r.summary.errors,
                             r.search))
    order = {v: i for i, v in enumerate(dict.fromkeys(p.variant for p in out))}
    return sorted(out, key=lambda p: (p.workload, p.nprobe, p.rate, order[p.variant]))


def _at(r: CellResult) -> tuple[str, int, float | None]:
    return r.cell.workload, r.cell.nprobe, r.cell.rate


def highest_rate_within(points: Sequence[RatePoint], slo_s: float) -> dict[tuple, float | None]:
    """Per (workload, nprobe, variant): the highest rate offered at which the variant's p95
    latency stayed within the SLO with no failed request (None: at none)."""
    best: dict[tuple, float | None] = {}
    for p in points:
        key = (p.workload, p.nprobe, p.variant)
        best.setdefault(key, None)
        if p.errors == 0 and p.p95_s <= slo_s and (best[key] is None or p.rate > best[key]):
            best[key] = p.rate
    return best


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


def _seconds(latency: SearchLatency | None, field: str) -> str:
    return "-" if latency is None else f"{getattr(latency, field):.3f}"


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def latency_table(rows: Sequence[CellResult], slo_s: float, caption: str) -> Table:
    """Latency per rate and variant, -O0's mean beside it, the search latency of the
    retrievals (`bench.measure.search_latency`), and speculation's settlement."""
    table = Table(title=f"Online ablation: latency against the arrival rate (Poisson; mean vs "
                  f"{REFERENCE}'s at the same rate: below 1.00x is faster)", caption=caption)
    for col in ("workload", "nprobe", "rate/s", "variant", "mean s", "p50 s", "p95 s",
                f"mean vs {REFERENCE}", "search mean s", "search p95 s", "spec started",
                "adopted", "rolled back", "accuracy", "tokens discarded", "held back",
                "warm searches"):
        table.add_column(col, justify="left" if col in ("workload", "variant") else "right")
    points = rate_points(rows)
    for _, group in groupby(points, key=lambda p: (p.workload, p.nprobe, p.rate)):
        cell = list(group)
        for i, p in enumerate(cell):
            first = i == 0
            table.add_row(p.workload if first else "", str(p.nprobe) if first else "",
                          f"{p.rate:g}" if first else "", p.variant, f"{p.mean_s:.2f}",
                          f"{p.p50_s:.2f}", f"{p.p95_s:.2f}" + (" *" if p.p95_s > slo_s else ""),
                          _x(p.vs_reference), _seconds(p.search, "mean_s"),
                          _seconds(p.search, "p95_s"),
                          str(p.started), str(p.adopted), str(p.rolled_back),
                          _pct(p.accuracy), str(p.discarded_tokens), str(p.held_back),
                          str(p.warm_searches), end_section=i == len(cell) - 1)
    return table


def slo_table(rows: Sequence[CellResult], slo_s: float, caption: str) -> Table:
    """Per workflow and variant: the highest rate within the SLO, over -O0's."""
    best = highest_rate_within(rate_points(rows), slo_s)
    table = Table(title=f"Online ablation: the highest rate offered within the SLO (p95 <= "
                  f"{slo_s:g} s)", caption=caption)
    for col in ("workload", "nprobe", "variant", "rate/s", f"vs {REFERENCE}"):
        table.add_column(col, justify="left" if col in ("workload", "variant") else "right")
    for (workload, nprobe, variant), rate in best.items():
        ref = best.get((workload, nprobe, REFERENCE))
        table.add_row(workload, str(nprobe), variant, "-" if rate is None else f"{rate:g}",
                      _x(rate / ref if rate is not None and ref else None))
    return table
