"""The shipped default's own point in one tune run: measured whether or not the search would
have measured it, and the recommendation compared with it (throughput ratio, EM/F1 difference),
or, where the recommendation is the default, the reason."""

from __future__ import annotations

import asyncio

from ragraph.dsl import load
from ragraph.tune.front import Constraint, recommend
from ragraph.tune.measure import Measurement
from ragraph.tune.report import default_lines
from ragraph.tune.results import Results
from ragraph.tune.search import search
from ragraph.tune.space import Point, shipped

from .surface import SPACE, Counting, every_point, surface
from .test_cli import WORKFLOWS

# The dearest quality setting: (16, 5, 3, 1.0) answers as well for less, so the search prunes
# this setting at every speed setting but the reference.
DEFAULT = Point(32, 10, 3, "-O2", 16, 1.0)


def _run(default: Point | None, measure: Counting | None = None):
    return asyncio.run(search(SPACE, measure or Counting(), Results(None, "c"), lambda step: None,
                              default))


def test_the_default_is_measured_where_the_search_prunes_it():
    plain, measure = _run(None), Counting()
    searched = _run(DEFAULT, measure)
    assert DEFAULT.key not in [m.point.key for m in plain.measured]
    assert measure.calls.count(DEFAULT.key) == 1 and measure.calls[-1] == DEFAULT.key
    assert searched.default is not None and searched.default.point == DEFAULT
    # Measured after all: one fewer point not measured, the rest as without it.
    assert searched.pruned == plain.pruned - 1 and searched.by_model == plain.by_model
    assert len(measure.calls) == len(every_point()) - searched.pruned


def test_a_default_the_search_measures_or_outside_the_space_is_measured_once():
    at_reference = SPACE.point((32, 10, 3, 1.0), SPACE.reference)
    measure = Counting()
    searched = _run(at_reference, measure)
    assert measure.calls.count(at_reference.key) == 1
    assert searched.default is not None and searched.default.point == at_reference
    assert searched.pruned == _run(None).pruned
    outside = Point(32, 10, 3, "-O2", 8, 1.0)  # concurrency 8 is not searched
    searched = _run(outside, measure := Counting())
    assert measure.calls[-1] == outside.key and searched.pruned == _run(None).pruned


def test_the_recommendation_against_the_default():
    points = [*every_point(), surface(DEFAULT)]
    rec = recommend(points, Constraint(), surface(DEFAULT))
    assert rec.point is not None and rec.point.point != DEFAULT
    ratio = rec.point.throughput_rps / surface(DEFAULT).throughput_rps
    head, against = default_lines(rec)
    assert head.startswith(f"the default ({DEFAULT.key}): ") and "misses" not in head
    assert f"{ratio:.2f}x its throughput" in against
    em = 100 * (rec.point.em - surface(DEFAULT).em)
    assert f"EM {em:+.1f}" in against and ratio > 1
    # The default misses a p95 target the recommendation meets: said with the default.
    tight = recommend(points, Constraint(p95_s=0.3), surface(DEFAULT))
    assert "(it misses p95 <= 0.3s)" in default_lines(tight)[0]


def _m(em: float, rps: float, topk: int) -> Measurement:
    return Measurement(Point(8, topk, None, "-O2", 8), em, em, None, rps, 1.0, 0, ())


def test_where_the_default_is_recommended_tune_says_why():
    default, faster, slower = _m(0.5, 2.0, 5), _m(0.3, 4.0, 2), _m(0.5, 1.0, 10)
    rec = recommend([default, faster, slower], Constraint(), default)
    assert rec.point is default
    why = default_lines(rec)[1]
    assert why.startswith("  the recommendation is the default: the faster ones")
    assert f"{faster.point.key}: 2.00x, EM -20.0 points" in why
    alone = recommend([default, slower], Constraint(), default)
    assert "no measured configuration that meets the target is faster" in default_lines(alone)[1]
    assert default_lines(recommend([default], Constraint())) == []


def test_the_shipped_point_is_the_workflow_as_written_at_the_runs_knobs():
    hyde = load(WORKFLOWS / "hyde.rag")
    assert shipped(hyde, 32, "-O2", 8) == Point(32, 5, None, "-O2", 8, 1.0)
    ircot = load(WORKFLOWS / "ircot.rag")
    assert shipped(ircot, 16, "-O0", 4) == Point(16, 4, 3, "-O0", 4, 1.0)
