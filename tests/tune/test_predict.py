"""The speed model's predictions: exact where a speed knob's effect does not depend on the
setting (the synthetic surface), close where it does; pruning on them never drops a front
point; the table prints predicted beside measured; the results file keeps both."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from pathlib import Path

from rich.console import Console

from ragraph.tune.front import front, low_p95, throughput
from ragraph.tune.measure import Measurement, Predicted
from ragraph.tune.predict import predict, predicted_out
from ragraph.tune.report import front_table, prediction_lines
from ragraph.tune.results import Results
from ragraph.tune.search import search
from ragraph.tune.space import Point

from .surface import SPACE, Counting, cost_s, every_point, surface


def _search(measure, results: Results | None = None):
    return asyncio.run(search(SPACE, measure, results or Results(None, "c"), lambda step: None))


def test_on_a_separable_surface_every_prediction_is_exact_and_some_points_are_skipped():
    searched = _search(Counting())
    predicted = [m for m in searched.measured if m.predicted is not None]
    assert predicted
    for m in predicted:
        assert abs(m.predicted.error(m.throughput_rps)) < 1e-9
        assert abs(m.predicted.p95_s / m.p95_s - 1) < 1e-9
    # -O0 runs slower and longer than -O2 at the same concurrency: predicted out, bar the
    # first setting of each -O0 speed setting, which calibrates it.
    assert searched.by_model > 0
    calibrating = [m for m in searched.measured if m.predicted is None and m.point.passes == "-O0"]
    assert len(calibrating) == len([s for s in SPACE.speed_settings() if s[0] == "-O0"])


def skewed(p: Point) -> Measurement:
    """Concurrency helps a light request more than a heavy one (the search side saturates):
    the speed knobs' effect depends on the setting, so the model is only close."""
    m = surface(p)
    gain = p.concurrency ** (0.5 - 0.4 * min(cost_s(p), 1.0))
    return replace(m, throughput_rps=gain * (1.3 if p.passes == "-O2" else 1.0) / cost_s(p))


@dataclass
class Skewed:
    calls: list[str] = field(default_factory=list)

    async def __call__(self, point: Point) -> Measurement:
        self.calls.append(point.key)
        return skewed(point)


def test_pruning_on_predictions_never_drops_a_front_point():
    measure = Skewed()
    searched = _search(measure)
    full = [skewed(m.point) for m in every_point()]
    for speed in (throughput, low_p95):
        assert {m.point for m in front(searched.measured, speed)} == \
               {m.point for m in front(full, speed)}
    assert searched.by_model > 0
    assert len(measure.calls) == len(full) - searched.pruned
    errors = [abs(m.predicted.error(m.throughput_rps)) for m in searched.measured
              if m.predicted is not None]
    assert errors and max(errors) < 0.2


def test_a_prediction_is_skipped_only_when_beaten_on_both_fronts():
    good = surface(SPACE.point((16, 5, 3, 1.0), ("-O2", 4)))
    quality = (0.0, 0.0, 0.0)
    beaten = Predicted(good.throughput_rps / 2, good.p95_s * 2)
    assert predicted_out(beaten, quality, [good])
    assert not predicted_out(Predicted(good.throughput_rps / 2, good.p95_s), quality, [good])
    assert not predicted_out(Predicted(good.throughput_rps / 1.1, good.p95_s * 1.1), quality,
                             [good])  # within the margin: measured
    assert not predicted_out(beaten, (1.1, 1.1, 1.1), [good])  # it answers better


def test_no_prediction_without_a_reference_or_a_calibrated_speed():
    ref = surface(SPACE.point((4, 2, 1, 0.5), SPACE.reference))
    other = SPACE.point((4, 2, 1, 0.5), ("-O0", 1))
    assert predict(other, SPACE.reference, [ref]) is None
    assert predict(SPACE.point((8, 2, 1, 0.5), ("-O0", 1)), SPACE.reference,
                   [ref, surface(other)]) is None


def test_the_table_prints_predicted_beside_measured_and_the_file_keeps_both(tmp_path: Path):
    path = tmp_path / "points.jsonl"
    searched = _search(Counting(), Results.open(path, "c"))
    again = Results.open(path, "c")
    assert {k: m.predicted for k, m in again.measured.items()} == \
           {m.point.key: m.predicted for m in searched.measured}
    console = Console(record=True, width=200)
    points = front(searched.measured, low_p95)
    console.print(front_table("t", points, None))
    for line in prediction_lines(searched.measured, points, searched.pruned, searched.by_model):
        console.print(line)
    text = console.export_text()
    assert "pred" in text and "err" in text and "calib." in text and "+0%" in text
    assert f"{searched.by_model} predicted dominated by a 20% margin" in text
