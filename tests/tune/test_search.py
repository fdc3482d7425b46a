"""The search on a synthetic surface with a known front: pruning by dominance measures fewer
points and finds the same fronts as measuring every point."""

from __future__ import annotations

import asyncio

from ragraph.tune.front import (
    Constraint,
    dominated_setting,
    dominates,
    front,
    low_p95,
    recommend,
    throughput,
)
from ragraph.tune.measure import Measurement
from ragraph.tune.results import Results
from ragraph.tune.search import search
from ragraph.tune.space import Point

from .surface import SPACE, Counting, every_point, surface


def _run(measure: Counting, results: Results | None = None):
    return asyncio.run(search(SPACE, measure, results or Results(None, "c"), lambda step: None))


def test_pruned_search_finds_the_front_of_every_point():
    measure = Counting()
    searched = _run(measure)
    full = every_point()
    for speed in (throughput, low_p95):
        assert {m.point for m in front(searched.measured, speed)} == \
               {m.point for m in front(full, speed)}
    # nprobe 32 and top-k 10 add nothing on this surface: their settings are not searched
    # at other speed settings, and no point was measured twice.
    assert searched.pruned > 0
    assert len(measure.calls) == len(set(measure.calls)) == len(full) - searched.pruned


def test_front_on_a_hand_made_set():
    def m(em: float, rps: float) -> Measurement:
        return Measurement(Point(8, int(rps * 10), None, "-O2", 4), em, em, None, rps, 1 / rps,
                           0, ())

    a, b, c, d = m(0.5, 1.0), m(0.4, 2.0), m(0.4, 1.5), m(0.3, 2.0)
    assert [p.throughput_rps for p in front([a, b, c, d], throughput)] == [1.0, 2.0]
    assert dominates(b, c, throughput) and dominates(b, d, throughput)
    assert not dominates(a, b, throughput) and not dominates(b, a, throughput)


def test_a_setting_is_pruned_only_by_a_cheaper_one_that_answers_as_well():
    first = [surface(SPACE.point(q, SPACE.reference)) for q in SPACE.quality_settings()]
    assert dominated_setting((32, 5, 3, 1.0), first)  # (16, 5, 3, 1.0) is cheaper and as good
    assert not dominated_setting((16, 5, 3, 1.0), first)  # the best: nothing beats it
    assert not dominated_setting((4, 2, 1, 0.5), first)  # the cheapest: nothing is cheaper


def test_recommendation_meets_the_target_and_says_what_it_gives_up():
    points = every_point()
    best = max(points, key=lambda m: (m.quality, m.throughput_rps))
    rec = recommend(points, Constraint(p95_s=0.3))
    assert rec.point is not None and rec.point.p95_s <= 0.3
    assert rec.best is best and rec.point.em < best.em  # the best quality misses the target
    meets = [p for p in points if p.p95_s <= 0.3]
    assert rec.point.em >= max(p.em for p in meets) - 0.01
    # No target: the fastest within one EM point of the best.
    free = recommend(points, Constraint())
    assert free.point.em >= best.em - 0.01
    assert free.point.throughput_rps == max(p.throughput_rps for p in points
                                            if p.em >= best.em - 0.01)
    assert recommend(points, Constraint(min_throughput=1e9)).point is None
