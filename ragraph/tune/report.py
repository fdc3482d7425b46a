"""What tune prints: a progress line per point, the fronts as a table, the recommendation with
what it gives up against the best-quality point, and the exactness check's verdict."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table

from ragraph.tune.front import Mismatch, Recommendation
from ragraph.tune.measure import Measurement
from ragraph.tune.predict import MARGIN
from ragraph.tune.search import Step

SPEED_KNOBS = "passes, concurrency, release, the simulated engine's budget"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def describe(m: Measurement) -> str:
    errors = f", {m.errors} errors" if m.errors else ""
    return (f"EM {_pct(m.em)} F1 {_pct(m.f1)} recall {_pct(m.recall)}, "
            f"{m.throughput_rps:.2f} req/s, p95 {m.p95_s:.2f}s{errors}")


def progress_line(step: Step) -> str:
    how = "from the results file" if step.resumed else "measured"
    return f"[{step.index}/{step.planned}] {step.measurement.point.key}: " \
           f"{describe(step.measurement)} ({how})"


def front_table(title: str, points: Sequence[Measurement],
                chosen: Measurement | None) -> Table:
    table = Table(title=title, caption="* the recommended configuration")
    budgets = any(m.point.budget is not None for m in points)  # searched on sim only
    speed = ("passes", "conc", "release", *(("budget",) if budgets else ()))
    for name in ("nprobe", "topk", "rounds", "gen", *speed):
        table.add_column(name, justify="right")
    for name in ("EM", "F1", "recall", "req/s", "pred", "err", "p95 s"):
        table.add_column(name, justify="right")
    for m in points:
        p = m.point
        mark = "*" if m is chosen else ""
        rounds = "–" if p.rounds is None else str(p.rounds)
        budget = (str(p.budget) if p.budget is not None else "–",) if budgets else ()
        table.add_row(f"{mark}{p.nprobe}", str(p.topk), rounds, f"{p.gen_share:g}", p.passes,
                      str(p.concurrency), p.release, *budget, _pct(m.em), _pct(m.f1),
                      _pct(m.recall), f"{m.throughput_rps:.2f}", *_predicted(m),
                      f"{m.p95_s:.2f}")
    return table


def _predicted(m: Measurement) -> tuple[str, str]:
    """The predicted throughput and its error; a calibration point was not predicted."""
    if m.predicted is None:
        return "calib.", ""
    return f"{m.predicted.throughput_rps:.2f}", f"{100 * m.predicted.error(m.throughput_rps):+.0f}%"


def prediction_lines(points: Sequence[Measurement], front_points: Sequence[Measurement],
                     pruned: int, by_model: int) -> list[str]:
    """How many points the speed model skipped, and how close its predictions came."""
    lines = [f"{len(points)} points measured or resumed, {pruned} not measured: "
             f"{pruned - by_model} of quality settings a cheaper one answered as well as, "
             f"{by_model} predicted dominated by a {100 * MARGIN:.0f}% margin"]
    for name, among in (("measured points", points), ("front points", front_points)):
        errors = [abs(m.predicted.error(m.throughput_rps)) for m in among if m.predicted]
        if errors:
            lines.append(f"predicted throughput against measured, {name}: mean error "
                         f"{100 * sum(errors) / len(errors):.0f}%, worst {100 * max(errors):.0f}% "
                         f"({len(errors)} predicted, the rest calibrated the model)")
    return lines


def recommendation_lines(rec: Recommendation) -> list[str]:
    target = rec.constraint.describe()
    if rec.point is None:
        return [f"no measured configuration meets {target}; the best quality measured: "
                f"{rec.best.point.key}: {describe(rec.best)}"]
    rule = "the fastest within 1 EM point of the best" + (
        "" if target == "no target" else " that meets it")
    lines = [f"recommended ({target}, {rule}): {rec.point.point.key}", f"  {describe(rec.point)}"]
    if rec.point is rec.best:
        return [*lines, "  it is the best-quality configuration measured: it gives up nothing"]
    best, chosen = rec.best, rec.point
    speedup = chosen.throughput_rps / best.throughput_rps if best.throughput_rps else float("inf")
    lines += [f"  against the best quality ({best.point.key}): EM {_delta(chosen.em, best.em)}, "
              f"F1 {_delta(chosen.f1, best.f1)} points; {speedup:.2f}x its throughput, "
              f"p95 {chosen.p95_s:.2f}s against {best.p95_s:.2f}s"]
    return lines


def default_lines(rec: Recommendation) -> list[str]:
    """The shipped default's own point, and the recommendation against it: its throughput
    ratio and EM/F1 difference, or, where the recommendation is the default, why."""
    default, chosen = rec.default, rec.point
    if default is None:
        return []
    target = rec.constraint.describe()
    misses = "" if rec.constraint.met(default) else f" (it misses {target})"
    lines = [f"the default ({default.point.key}): {describe(default)}{misses}"]
    if chosen is None:
        return lines
    if chosen.point == default.point:
        return [*lines, f"  the recommendation is the default: {_why_default(rec)}"]
    ratio = (chosen.throughput_rps / default.throughput_rps if default.throughput_rps
             else float("inf"))
    return [*lines, f"  the recommendation against it: {ratio:.2f}x its throughput, EM "
                    f"{_delta(chosen.em, default.em)}, F1 {_delta(chosen.f1, default.f1)} "
                    f"points, p95 {chosen.p95_s:.2f}s against {default.p95_s:.2f}s"]


def _why_default(rec: Recommendation) -> str:
    fastest, chosen = rec.fastest, rec.point
    if fastest is None or chosen is None or fastest.throughput_rps <= chosen.throughput_rps:
        return "no measured configuration that meets the target is faster"
    speedup = fastest.throughput_rps / chosen.throughput_rps
    return (f"the faster ones that meet the target answer more than 1 EM point below the best "
            f"that does (the fastest, {fastest.point.key}: {speedup:.2f}x, EM "
            f"{_delta(fastest.em, chosen.em)} points against it)")


def _delta(mine: float, best: float) -> str:
    return f"{100 * (mine - best):+.1f}"


def exactness_lines(compared: int, mismatches: Sequence[Mismatch],
                    promised: bool = True) -> list[str]:
    """Loud on a mismatch where the engine promises answers independent of batching (`promised`):
    every question answered differently is listed. Where it does not (the batched llama.cpp
    engine, a server), the same list says what batching changed, as that engine allows."""
    if compared == 0:
        return ["exactness: no quality setting was measured at two speed settings; not checked"]
    if not mismatches:
        return [f"exactness: OK, the speed knobs changed no answer ({compared} quality settings "
                "compared, each across its speed settings)"]
    if promised:
        head = (f"EXACTNESS VIOLATED: {len(mismatches)} answers differ between configurations "
                f"that differ only in speed knobs ({SPEED_KNOBS}); their quality figures are "
                "not comparable.")
    else:
        head = (f"exactness: not promised by this engine, which batches as it runs: "
                f"{len(mismatches)} answers differ between configurations that differ only in "
                f"speed knobs ({SPEED_KNOBS}), so their quality figures differ by that much. "
                "On llama.cpp, --exact makes answers independent of batching.")
    lines = [head]
    for m in mismatches:
        lines.append(f"  question {m.question}: {m.a.point.key} -> {dict(m.a.answers)[m.question]!r}"
                     f" but {m.b.point.key} -> {dict(m.b.answers)[m.question]!r}")
    return lines
