"""The search: every quality setting at the reference speed setting, cheapest first; then the
other speed settings of each quality setting no cheaper one dominates (`front.dominated_setting`).
A point already in the results file is taken from it, never measured again."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ragraph.tune.front import dominated_setting
from ragraph.tune.measure import Measure, Measurement
from ragraph.tune.results import Results
from ragraph.tune.space import Point, Space


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
    pruned: int  # points of dominated quality settings that were not measured


async def search(space: Space, measure: Measure, results: Results,
                 progress: Progress) -> Searched:
    settings = space.quality_settings()
    others = [s for s in space.speed_settings() if s != space.reference]
    done: list[Measurement] = []

    async def take(point: Point, planned: int) -> None:
        known = results.get(point.key)
        resumed = known is not None
        if known is None:
            known = await measure(point)
            results.add(known)
        done.append(known)
        progress(Step(len(done), planned, known, resumed))

    planned = len(settings) * (1 + len(others))
    for setting in settings:
        await take(space.point(setting, space.reference), planned)
    first = list(done)
    kept = [s for s in settings if not dominated_setting(s, first)]
    planned = len(settings) + len(kept) * len(others)
    for setting in kept:
        for speed in others:
            await take(space.point(setting, speed), planned)
    return Searched(done, pruned=(len(settings) - len(kept)) * len(others))
