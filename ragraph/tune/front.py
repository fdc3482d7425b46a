"""Dominance, the Pareto fronts, the recommendation and the exactness check: pure functions of
the measured points."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ragraph.tune.measure import Measurement
from ragraph.tune.space import QualityKey

# A speed is "higher is better": throughput as it is, p95 negated.
Speed = Callable[[Measurement], float]


def throughput(m: Measurement) -> float:
    return m.throughput_rps


def low_p95(m: Measurement) -> float:
    return -m.p95_s


def dominates(a: Measurement, b: Measurement, speed: Speed) -> bool:
    """`a` answers at least as well and runs at least as fast, and is better in one of them."""
    at_least = a.quality >= b.quality and speed(a) >= speed(b)
    return at_least and (a.quality > b.quality or speed(a) > speed(b))


def front(points: Sequence[Measurement], speed: Speed) -> list[Measurement]:
    """The points no other point dominates, best quality first."""
    kept = [p for p in points if not any(dominates(q, p, speed) for q in points)]
    return sorted(kept, key=lambda m: (m.quality, speed(m)), reverse=True)


def cheaper(a: QualityKey, b: QualityKey) -> bool:
    """Every quality knob of `a` asks for no more work than `b`'s (fewer clusters, passages,
    rounds, generated tokens), so `a` is at least as fast as `b` at any speed setting."""
    return all(x is None or y is None or x <= y for x, y in zip(a, b, strict=True))


def dominated_setting(setting: QualityKey, first: Sequence[Measurement]) -> bool:
    """Pruning by dominance: another setting, no dearer in any knob, answers at least as
    well, so no speed setting can put `setting` on the front that the other's cannot match."""
    mine = [m for m in first if m.point.quality == setting]
    return any(m.point.quality != setting and cheaper(m.point.quality, setting)
               and m.quality >= mine[0].quality for m in first) if mine else False


@dataclass(frozen=True)
class Constraint:
    p95_s: float | None = None  # --slo p95=...
    min_throughput: float | None = None  # --min-throughput

    def met(self, m: Measurement) -> bool:
        return (m.errors == 0 and (self.p95_s is None or m.p95_s <= self.p95_s)
                and (self.min_throughput is None or m.throughput_rps >= self.min_throughput))

    def describe(self) -> str:
        said = ([f"p95 <= {self.p95_s:g}s"] if self.p95_s is not None else []) + (
            [f">= {self.min_throughput:g} req/s"] if self.min_throughput is not None else [])
        return " and ".join(said) or "no target"


# The recommendation takes the fastest point this close to the best EM (one EM point).
EM_SLACK = 0.01


@dataclass(frozen=True)
class Recommendation:
    point: Measurement | None  # None: no point meets the constraint
    best: Measurement  # the best quality measured, constraint or not
    constraint: Constraint
    default: Measurement | None = None  # the shipped default's point, to compare with
    fastest: Measurement | None = None  # the fastest point that meets the constraint


def recommend(points: Sequence[Measurement], constraint: Constraint,
              default: Measurement | None = None) -> Recommendation:
    """The fastest point within one EM point of the best quality that meets the constraint."""
    best = max(points, key=lambda m: (m.quality, m.throughput_rps))
    meets = [m for m in points if constraint.met(m)]
    if not meets:
        return Recommendation(None, best, constraint, default)
    top = max(m.em for m in meets)
    near = [m for m in meets if m.em >= top - EM_SLACK]
    return Recommendation(max(near, key=lambda m: (m.throughput_rps, m.quality)), best,
                          constraint, default, max(meets, key=lambda m: m.throughput_rps))


@dataclass(frozen=True)
class Mismatch:
    """Two points of one quality setting that answered a question differently."""

    question: str
    a: Measurement
    b: Measurement


def exactness(points: Sequence[Measurement]) -> tuple[int, list[Mismatch]]:
    """Checks the exactness rule on the measured points: those of one quality setting (differing
    only in speed knobs) gave each question the same answer. The settings compared (those
    measured at two speed settings or more), and every question answered differently."""
    groups: dict[QualityKey, list[Measurement]] = {}
    for m in points:
        groups.setdefault(m.point.quality, []).append(m)
    mismatches = []
    compared = [g for g in groups.values() if len(g) > 1]
    for group in compared:
        ref = dict(group[0].answers)
        for other in group[1:]:
            mismatches += [Mismatch(qid, group[0], other) for qid, answer in other.answers
                           if ref.get(qid) != answer]
    return len(compared), mismatches
