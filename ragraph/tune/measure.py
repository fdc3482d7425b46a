"""One point measured: its answers scored as `ragraph eval` scores a predictions file, its speed
by the bench's offline protocol (`bench.run.cells.run_cell`: every dev question at once, at the
point's concurrency, on the shared index; throughput and p95 as the bench reports them), with the
point's speed knobs set in the run's configuration."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ragraph.eval.predictions import Prediction, parse_prediction
from ragraph.eval.records import Record
from ragraph.eval.report import summarize_group
from ragraph.ir.graph import RAGraph
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.outcome import Outcome
from ragraph.runtime.request import Request
from ragraph.runtime.search_service import SearchService
from ragraph.tune.space import AS_SHIPPED, Point, Unsearched, with_quality

Answers = tuple[tuple[str, str | None], ...]  # (question id, answer), in id order


@dataclass(frozen=True)
class Predicted:
    """A point's speed as the speed model predicted it before it was measured (predict.py)."""

    throughput_rps: float
    p95_s: float

    def error(self, measured_rps: float) -> float:
        """The predicted throughput's error, as a share of the measured (+: predicted faster)."""
        return self.throughput_rps / measured_rps - 1 if measured_rps else float("inf")


@dataclass(frozen=True)
class Measurement:
    point: Point
    em: float
    f1: float
    recall: float | None  # a golden answer among the retrieved passages (None: none recorded)
    throughput_rps: float
    p95_s: float
    errors: int
    answers: Answers
    predicted: Predicted | None = None  # None: measured to calibrate the model, not predicted

    @property
    def quality(self) -> tuple[float, float, float]:
        """What the front ranks answers by: EM, then F1, then retrieval recall."""
        return (self.em, self.f1, self.recall or 0.0)

    def to_json(self) -> dict[str, Any]:
        return {"point": self.point.to_json(), "em": self.em, "f1": self.f1,
                "recall": self.recall, "throughput_rps": self.throughput_rps,
                "p95_s": self.p95_s, "errors": self.errors,
                "answers": {qid: answer for qid, answer in self.answers},
                "predicted": None if self.predicted is None else {
                    "throughput_rps": self.predicted.throughput_rps,
                    "p95_s": self.predicted.p95_s}}

    @classmethod
    def from_json(cls, raw: dict[str, Any], before: Unsearched = AS_SHIPPED) -> Measurement:
        """`before`: what a point written before the release and the budget were searched
        ran at (`Point.from_json`)."""
        return cls(Point.from_json(raw["point"], before), float(raw["em"]), float(raw["f1"]),
                   None if raw["recall"] is None else float(raw["recall"]),
                   float(raw["throughput_rps"]), float(raw["p95_s"]), int(raw["errors"]),
                   tuple(sorted(raw["answers"].items())),
                   _prediction_of(raw.get("predicted")))


def _prediction_of(raw: dict[str, Any] | None) -> Predicted | None:
    """A results line's prediction (lines written before predictions were kept have none)."""
    if raw is None:
        return None
    return Predicted(float(raw["throughput_rps"]), float(raw["p95_s"]))


Measure = Callable[[Point], Awaitable[Measurement]]


def scored(point: Point, outcomes: Sequence[Outcome], throughput_rps: float,
           p95_s: float) -> Measurement:
    """The outcomes read as the prediction lines `ragraph run --output` writes, and scored by
    `ragraph eval`'s summary."""
    predictions = [_prediction(o, i) for i, o in enumerate(outcomes, 1)]
    summary = summarize_group("tune", predictions)
    return Measurement(point, summary.em or 0.0, summary.f1 or 0.0, summary.answer_recall,
                       throughput_rps, p95_s, summary.errors,
                       tuple(sorted((o.rid, o.answer) for o in outcomes)))


def _prediction(outcome: Outcome, line: int) -> Prediction:
    return parse_prediction(Record("tune", line, outcome.to_json()))


def run_settings(point: Point) -> tuple[tuple[str, object], ...]:
    """The run configuration's knobs a point sets beside its passes, nprobe and concurrency
    (which the bench's cell sets): its release, and on the simulated engine its budget."""
    budget = () if point.budget is None else (("sim_budget", point.budget),)
    return (("release", point.release), *budget)


@dataclass(frozen=True)
class BenchMeasure:
    """Measures points of one workflow on the dev questions with the run's engines and index."""

    graph: RAGraph
    requests: tuple[Request, ...]
    runtime: RuntimeConfig
    search: SearchService

    async def __call__(self, point: Point) -> Measurement:
        from ragraph.bench.run.cells import Cell, Job, Variant, run_cell

        outcomes: list[Outcome] = []
        cell = Cell(self.graph.name, point.nprobe, None, point.concurrency)
        job = Job(with_quality(self.graph, point), self.requests,
                  tuple(0.0 for _ in self.requests))
        executor = self.runtime.scheduler.executor
        variant = Variant(executor, executor, point.passes, run_settings(point))
        [row] = await run_cell(cell, [job], self.runtime, self.search, [variant],
                               outcomes.append)
        return scored(point, outcomes, row.summary.throughput_rps, row.summary.p95_s)

    async def warm_up(self, point: Point) -> None:
        """An untimed run of a few questions before the first point: a process's first run
        pays for first use (the embedder's first passes, the index's pages), as the bench's
        warm-up says, and the first point measured would carry it alone."""
        await BenchMeasure(self.graph, self.requests[:2], self.runtime, self.search)(point)
