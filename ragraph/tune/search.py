"""The search: every quality setting at the reference speed setting, cheapest first; then the
other speed settings (`speed_order`: those nearest the reference first) of each quality setting
no cheaper one dominates (`front.dominated_setting`), best quality first, each predicted by the
speed model before it is measured and skipped where the prediction is dominated by its margin
(`predict.predicted_out`); last the shipped default's own point, where the search left it out,
since the recommendation is compared with it. A point already in the results file is taken from
it, never measured again."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from ragraph.tune.front import dominated_setting
from ragraph.tune.measure import Measure, Measurement
from ragraph.tune.predict import predict, predicted_out
from ragraph.tune.results import Results
from ragraph.tune.space import Point, Space, Speed


@dataclass(frozen=True)
class Step:
    """One point done, for the progress line: its place in the plan and whether it was
    measured now or read from the results file."""

    index: int
    planned: int
    measurement: Measurement
    resumed: bool


Progress = Callable[[Step], None]


@dataclass(frozen=True)
class Searched:
    measured: list[Measurement]
    pruned: int  # points not measured: of dominated quality settings, or predicted dominated
    by_model: int = 0  # of those, the points the speed model predicted dominated
    default: Measurement | None = None  # the shipped default's point (None: none was given)


async def search(space: Space, measure: Measure, results: Results, progress: Progress,
                 default: Point | None = None) -> Searched:
    settings = space.quality_settings()
    others = speed_order(space)
    done: list[Measurement] = []

    async def take(point: Point, planned: int) -> None:
        known = results.get(point.key)
        resumed = known is not None
        if known is None:
            guess = predict(point, space.reference, done)
            known = replace(await measure(point), predicted=guess)
            results.add(known)
        done.append(known)
        progress(Step(len(done), planned, known, resumed))

    planned = len(settings) * (1 + len(others))
    for setting in settings:
        await take(space.point(setting, space.reference), planned)
    first = {m.point.quality: m for m in done}
    kept = sorted((s for s in settings if not dominated_setting(s, list(first.values()))),
                  key=lambda s: first[s].quality, reverse=True)
    planned = len(settings) + len(kept) * len(others)
    skipped = 0
    for speed in others:
        for setting in kept:
            point = space.point(setting, speed)
            guess = predict(point, space.reference, done)
            if results.get(point.key) is None and guess is not None and predicted_out(
                    guess, first[setting].quality, done):
                skipped += 1
                continue
            await take(point, planned - skipped)
    dominated = (len(settings) - len(kept)) * len(others)
    searched = Searched(done, pruned=dominated + skipped, by_model=skipped)
    if default is None:
        return searched
    late = all(m.point != default for m in done)
    if late:
        await take(default, planned - skipped + 1)
    return _with_default(searched, default, late and space.holds(default),
                         default.quality in kept)


def speed_order(space: Space) -> list[Speed]:
    """The speed settings but the reference, the reference's pass pipeline first, then its
    release, then its budget, each group by concurrency: a setting's first quality setting
    calibrates the speed model for it, and one knob moved at a time keeps the knobs' effects
    apart in the progress lines."""
    ref = space.reference

    def order(s: Speed) -> tuple:
        moved = (s.passes != ref.passes, s.release != ref.release, s.budget != ref.budget)
        return (*moved, s.passes, s.release, -(s.budget or 0), s.concurrency)

    return sorted((s for s in space.speed_settings() if s != ref), key=order)


def _with_default(searched: Searched, default: Point, pruned: bool, by_model: bool) -> Searched:
    """`searched` with the default's measurement. A default point of the space that a pruning
    rule left out (`pruned`; by the speed model where its setting was `kept`) was measured all
    the same: it no longer counts as not measured."""
    mine = next(m for m in searched.measured if m.point == default)
    fewer = 1 if pruned else 0
    return replace(searched, pruned=searched.pruned - fewer,
                   by_model=searched.by_model - (fewer if by_model else 0), default=mine)
