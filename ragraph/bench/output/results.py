"""From cell results to what the bench reports: ratios to the baselines, the throughput within the
latency SLO, the retrieval share of sequential requests, the targets, and the CSV."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from ragraph.bench.measure.bounds import BEFORE, Rates
from ragraph.bench.measure.search_latency import search_columns
from ragraph.bench.run.cells import CellResult
from ragraph.bench.server.alone import LABEL as SERVER_ALONE

BASELINES = ("sequential", "stage-batched", "langgraph")


@dataclass(frozen=True)
class SloPoint:
    """The best throughput of one executor on one workload and nprobe with p95 <= SLO: the
    highest measured throughput (completed requests / wall time) among its runs, offline or
    online, whose p95 latency met the SLO."""

    workload: str
    nprobe: int
    executor: str
    rps: float | None  # None: no run met the SLO
    source: str  # "offline" or "online @ R/s"
    # The best run was the highest rate offered and kept up with it: this executor's max within
    # the SLO lies at or above `rps`, which the rates offered never reached.
    kept_up: bool = False


@dataclass(frozen=True)
class Target:
    workload: str
    nprobe: int
    baseline: str
    want: float
    got: float | None
    concurrency: int = 0
    metric: str = "throughput"  # or "p95" (baseline p95 / ragraph p95: >= 1 is no worse)
    # The most any executor could reach against this baseline on this LLM engine (see
    # `engine_ceiling_rps`); None where the engine did not say.
    ceiling: float | None = None
    # Whose best run kept up with the highest rate offered (`SloPoint.kept_up`): ragraph's
    # makes `got` a lower bound, the baseline's an upper bound.
    ours_kept_up: bool = False
    theirs_kept_up: bool = False

    @property
    def met(self) -> bool:
        return self.got is not None and self.got >= self.want and not self.theirs_kept_up

    @property
    def settled(self) -> bool:
        """Whether the rates offered decide the target: a bound on the wrong side does not."""
        if self.got is None:
            return True
        if self.got >= self.want:
            return not self.theirs_kept_up
        return not self.ours_kept_up

    def verdict(self) -> str:
        if self.got is None:
            return "not measured (no SLO-compliant run)"
        if not self.settled:
            if self.ours_kept_up and self.theirs_kept_up:
                bound, who = "", "both"
            elif self.ours_kept_up:
                bound, who = "at least ", "ragraph"
            else:
                bound, who = "at most ", self.baseline
            return (f"not settled ({bound}{self.got:.2f}x): {who} kept up with the highest rate "
                    "offered; offer higher rates (--rates)")
        if self.met:
            return f"met ({self.got:.2f}x >= {self.want:.1f}x)"
        missed = f"MISSED by {(1 - self.got / self.want) * 100:.0f}% ({self.got:.2f}x < {self.want:.1f}x)"
        if self.ceiling is not None and self.ceiling < self.want:
            missed += f"; out of reach on this LLM engine (at most {self.ceiling:.2f}x)"
        return missed

    @property
    def reachable(self) -> bool:
        return self.ceiling is None or self.ceiling >= self.want


def baselines_in(rows: Sequence[CellResult]) -> list[str]:
    """The baselines that ran, in `BASELINES` order (the first is the one ratios lead with)."""
    return [b for b in BASELINES if any(r.executor == b for r in rows)]


def ratio(ours: float | None, theirs: float | None) -> float | None:
    if ours is None or theirs is None or theirs <= 0:
        return None
    return ours / theirs


def by_executor(results: Sequence[CellResult]) -> dict[str, CellResult]:
    return {r.executor: r for r in results}


def throughput_ratio(cell: Sequence[CellResult], baseline: str) -> float | None:
    rows = by_executor(cell)
    if "ragraph" not in rows or baseline not in rows:
        return None
    return ratio(rows["ragraph"].summary.throughput_rps, rows[baseline].summary.throughput_rps)


def latency_ratio(cell: Sequence[CellResult], baseline: str, field: str = "p50_s") -> float | None:
    """How many times lower ragraph's latency is (baseline / ragraph); `field` of `Summary`."""
    rows = by_executor(cell)
    if "ragraph" not in rows or baseline not in rows:
        return None
    return ratio(getattr(rows[baseline].summary, field), getattr(rows["ragraph"].summary, field))


# Completed over offered requests a second from which an online run kept up with its arrivals:
# runs that kept up measured 0.92-0.97 (the Poisson arrivals of 128 requests, the last ones'
# latency in the wall time), one that fell behind 0.76.
KEPT_UP = 0.9


def slo_points(results: Sequence[CellResult], slo_s: float) -> list[SloPoint]:
    best: dict[tuple[str, int, str], SloPoint] = {}
    top: dict[tuple[str, int], float] = {}
    for r in results:
        if r.cell.rate is not None:
            key = (r.cell.workload, r.cell.nprobe)
            top[key] = max(top.get(key, 0.0), r.cell.rate)
    for r in results:
        key = (r.cell.workload, r.cell.nprobe, r.executor)
        best.setdefault(key, SloPoint(*key, None, "-"))
        if r.summary.errors or r.summary.p95_s > slo_s:
            continue
        rps = r.summary.throughput_rps
        src = "offline" if r.cell.rate is None else f"online @ {r.cell.rate:.2f}/s"
        if r.cell.concurrency:
            src += f", {r.cell.concurrency} in flight"
        kept_up = (r.cell.rate is not None and r.cell.rate == top[key[:2]]
                   and rps >= KEPT_UP * r.cell.rate)
        if kept_up:
            src += ", kept up with the highest rate offered"
        if best[key].rps is None or rps > best[key].rps:
            best[key] = SloPoint(*key, rps, src, kept_up)
    return list(best.values())


def slo_ratio(points: Sequence[SloPoint], workload: str, nprobe: int, baseline: str) -> float | None:
    got = {p.executor: p.rps for p in points if p.workload == workload and p.nprobe == nprobe}
    return ratio(got.get("ragraph"), got.get(baseline))


def engine_ceiling_rps(cell: Sequence[CellResult]) -> float | None:
    """The most requests a second the LLM engine serves whatever schedules them, as this cell
    measured it: one over the least engine time a request took among the executors (their
    largest batches; a prompt's prefill is compute-bound and cannot be batched away). None where
    the engine reports no times."""
    costs = [r.llm.busy_s / r.summary.requests for r in cell
             if r.summary.requests and not r.summary.errors and r.llm.busy_s > 0]
    return 1 / min(costs) if costs else None


def targets(points: Sequence[SloPoint], engine: str,
            rows: Sequence[CellResult] = (), repeats: bool = False) -> list[Target]:
    """sim (issue 7): throughput within the SLO, ragraph >= 1.5x (oneshot) / 3x (multistep, IRG)
    over sequential and >= 1.3x over stage-batched. llama.cpp (issue 14): offline throughput at
    8 requests in flight, ragraph >= 2x the LangGraph app on HyDE and IRG and >= 1.5x on oneshot
    and multistep, with p95 latency no worse; under traffic that `repeats` questions (issue
    31), 2x on HyDE and oneshot, 2.5x on IRG and multistep. A server (issue 28):
    `server_targets`."""
    if engine == "openai":
        return server_targets(rows)
    if engine != "sim":
        return llamacpp_targets(rows, want=LLAMACPP_REUSE_WANT if repeats else LLAMACPP_WANT)
    out = []
    for workload, nprobe in sorted({(p.workload, p.nprobe) for p in points}):
        want_seq = {"oneshot": 1.5, "multistep": 3.0, "irg": 3.0}.get(workload)
        if want_seq is None:
            continue
        ceiling = engine_ceiling_rps([r for r in rows if r.cell.rate is None and
                                      (r.cell.workload, r.cell.nprobe) == (workload, nprobe)])
        ours = _point(points, workload, nprobe, "ragraph")
        for baseline, want in (("sequential", want_seq), ("stage-batched", 1.3)):
            theirs = _point(points, workload, nprobe, baseline)
            out.append(Target(workload, nprobe, baseline, want,
                              slo_ratio(points, workload, nprobe, baseline),
                              ceiling=ratio(ceiling, theirs and theirs.rps),
                              ours_kept_up=bool(ours and ours.kept_up),
                              theirs_kept_up=bool(theirs and theirs.kept_up)))
    return out


def _point(points: Sequence[SloPoint], workload: str, nprobe: int,
           executor: str) -> SloPoint | None:
    return next((p for p in points
                 if (p.workload, p.nprobe, p.executor) == (workload, nprobe, executor)), None)


LLAMACPP_WANT = {"hyde": 2.0, "irg": 2.0, "oneshot": 1.5, "multistep": 1.5}
# Issue 31, --traffic zipf: a repeated question's prompts can come whole from the prefix store.
LLAMACPP_REUSE_WANT = {"hyde": 2.0, "oneshot": 2.0, "irg": 2.5, "multistep": 2.5}
LLAMACPP_CONCURRENCY = 8


def llamacpp_targets(rows: Sequence[CellResult], baseline: str = "langgraph",
                     want: dict[str, float] = LLAMACPP_WANT) -> list[Target]:
    """Offline, at 8 in flight (or the lowest concurrency run): throughput (`want` x) and p95
    vs `baseline`."""
    offline = [r for r in rows if r.cell.rate is None and r.cell.workload in want]
    concs = sorted({r.cell.concurrency for r in offline})
    if not concs:
        return []
    conc = LLAMACPP_CONCURRENCY if LLAMACPP_CONCURRENCY in concs else concs[0]
    out = []
    for workload, nprobe in sorted({(r.cell.workload, r.cell.nprobe) for r in offline}):
        cell = [r for r in offline
                if (r.cell.workload, r.cell.nprobe, r.cell.concurrency) == (workload, nprobe, conc)]
        out.append(Target(workload, nprobe, baseline, want[workload],
                          throughput_ratio(cell, baseline), conc))
        out.append(Target(workload, nprobe, baseline, 1.0,
                          latency_ratio(cell, baseline, "p95_s"), conc, "p95"))
    return out


# Issue 28, on a llama-server both call: every workflow, 16 requests in flight.
SERVER_WANT = 1.5
SERVER_CONCURRENCY = 16


def server_targets(rows: Sequence[CellResult], baseline: str = "langgraph") -> list[Target]:
    """Offline, at 16 in flight (or the highest concurrency run): ragraph >= 1.5x the LangGraph
    app's throughput on every workflow, p95 no worse. The ceiling is the server alone on the
    app's generation calls over the app (`bench.server.alone`): the most a client gains that
    gives the server the same work."""
    offline = [r for r in rows if r.cell.rate is None]
    concs = sorted({r.cell.concurrency for r in offline})
    if not concs:
        return []
    conc = SERVER_CONCURRENCY if SERVER_CONCURRENCY in concs else concs[-1]
    out = []
    for workload, nprobe in sorted({(r.cell.workload, r.cell.nprobe) for r in offline}):
        cell = by_executor([r for r in offline if (r.cell.workload, r.cell.nprobe,
                                                   r.cell.concurrency) == (workload, nprobe, conc)])
        alone, theirs = cell.get(SERVER_ALONE), cell.get(baseline)
        served = alone.summary if alone else None
        ceiling = ratio(served.throughput_rps if served and not served.errors else None,
                        theirs.summary.throughput_rps if theirs else None)
        out.append(Target(workload, nprobe, baseline, SERVER_WANT,
                          throughput_ratio(list(cell.values()), baseline), conc,
                          ceiling=ceiling))
        out.append(Target(workload, nprobe, baseline, 1.0,
                          latency_ratio(list(cell.values()), baseline, "p95_s"), conc, "p95"))
    return out


def write_csv(path: Path, results: Sequence[CellResult], context: dict[str, str]) -> None:
    """One row per (cell, executor), with the machine and engine on every row."""
    rows = []
    for r in results:
        row = columns(r, leave=("cell", "bound"))
        row.update(workload=r.cell.workload, nprobe=r.cell.nprobe, concurrency=r.cell.concurrency,
                   mode=r.cell.mode,
                   rate_rps=r.cell.rate if r.cell.rate is not None else "")
        row.update(bound_columns(r))
        row.update(context)
        rows.append(row)
    if not rows:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


# The run summary's fields the CSV and JSON leave out: their columns predate these two, and
# readers of earlier runs' files (docs/benchmarks, `--repeat` spreads) expect the same columns.
SUMMARY_LEFT_OUT = ("p99_s", "ttft_p50_s")


def columns(r: CellResult, leave: tuple[str, ...]) -> dict[str, object]:
    """The row's fields but `leave`, with the run's summary (`Summary`, but SUMMARY_LEFT_OUT),
    the LLM engine's counts (`LlmWork`) and the search latency (`search_mean_s`, ...) flat in
    their place, one column each, named as the field is."""
    row: dict[str, object] = {}
    for name, value in asdict(r).items():
        if name == "summary":
            row.update((k, v) for k, v in value.items() if k not in SUMMARY_LEFT_OUT)
        elif name == "llm":
            row.update(value)
        elif name == "search":
            row.update(search_columns(r.search))
        elif name not in leave:
            row[name] = value
    return row


# The bound's flat columns and the `Bound` field each holds.
_BOUND_COLUMNS = {"bound_s": "total_s", "bound_llm_s": "llm_s", "bound_prefill_s": "prefill_s",
                  "bound_decode_s": "decode_s", "bound_cores_s": "cores_s",
                  "bound_embed_s": "embed_s", "bound_search_s": "search_s"}


def bound_columns(r: CellResult) -> dict[str, float | str]:
    """The run's bound (`bench.measure.bounds`) in flat columns; empty strings where not
    measured."""
    row: dict[str, float | str] = {
        column: "" if r.bound is None else getattr(r.bound, name)
        for column, name in _BOUND_COLUMNS.items()}
    row["bound_share"] = "" if r.bound_share is None else r.bound_share
    return row


def write_json(path: Path, results: Sequence[CellResult], context: dict[str, str]) -> None:
    """The run as JSON: the context, the engines' rates every bound was priced at, and one
    entry per (cell, executor) with its bound and its share of it."""
    probes = probes_of(results)
    runs = []
    for r in results:
        run = columns(r, leave=("bound",))
        run.update(mode=r.cell.mode, bound=None if r.bound is None else {
            "llm_s": r.bound.llm_s, **{k: v for k, v in asdict(r.bound).items() if k != "rates"},
            "probed": r.bound.rates.probed}, bound_share=r.bound_share)
        runs.append(run)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"context": context,
                                "rates": asdict(probes[0]) if probes else None,
                                "probes": [asdict(p) for p in probes], "runs": runs},
                               indent=1) + "\n", encoding="utf-8")


def probes_of(results: Sequence[CellResult]) -> list[Rates]:
    """The engines' rates that priced at least one run's bound (`Rates.probed` says which
    probe), the one before the first cell first."""
    found = {r.bound.rates.probed: r.bound.rates for r in results if r.bound is not None}
    return sorted(found.values(), key=lambda p: p.probed != BEFORE)
