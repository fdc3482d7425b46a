"""Prediction files: the JSONL lines `ragraph run --output` writes, one answered request per line.

A line is `{id, question, answer | prediction, golden_answers?, error?, passages?, workflow?}`.
Golden answers and gold passages may come from the line itself or from the dataset file the
questions were taken from (`attach_golden`), matched by id, then by question text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ragraph.eval.datasets import GoldPassage, QAExample
from ragraph.eval.records import DatasetError, Record, iter_records


@dataclass(frozen=True)
class RetrievedPassage:
    title: str
    text: str
    id: str | None = None


@dataclass(frozen=True)
class Prediction:
    id: str
    question: str
    answer: str
    golden_answers: tuple[str, ...] | None = None  # None: unknown, so the line cannot be scored
    error: str | None = None
    passages: tuple[RetrievedPassage, ...] | None = None  # None: the run did not record them
    workflow: str | None = None
    gold_passages: tuple[GoldPassage, ...] = ()
    line: int = 0


def _passage(rec: Record, pos: int, value: object) -> RetrievedPassage:
    sub = Record(rec.path, rec.line, value)
    try:
        ident = sub.get("id", (str, int, type(None)), None)
        return RetrievedPassage(
            sub.text("title", ""), sub.text("text"), None if ident is None else str(ident)
        )
    except DatasetError as err:
        raise rec.error(f"field 'passages[{pos}]': {err.message}") from err


def _answer(rec: Record) -> str:
    fields = rec.fields()
    for name in ("answer", "prediction", "pred"):
        if name in fields:
            return rec.text(name) if fields[name] is not None else ""
    if fields.get("error"):
        return ""  # a failed request has no answer; it is counted as an error
    raise rec.error("missing field 'answer' (or 'prediction')")


def parse_prediction(rec: Record) -> Prediction:
    raw_passages = rec.get("passages", (list, type(None)), None)
    golden = rec.get("golden_answers", (list, type(None)), None)
    workflow = rec.get("workflow", (str, type(None)), None)
    return Prediction(
        id=str(rec.get("id", (str, int))),
        question=rec.text("question", ""),
        answer=_answer(rec),
        golden_answers=None if golden is None else rec.strings("golden_answers"),
        error=rec.get("error", (str, type(None)), None) or None,
        passages=None
        if raw_passages is None
        else tuple(_passage(rec, i, p) for i, p in enumerate(raw_passages)),  # type: ignore[arg-type]
        workflow=workflow,  # type: ignore[arg-type]
        line=rec.line,
    )


def read_predictions(path: str | Path) -> list[Prediction]:
    """Every prediction line of a file; a bad line raises `DatasetError` naming file:line and field."""
    predictions = [parse_prediction(rec) for rec in iter_records(Path(path))]
    if not predictions:
        raise DatasetError(str(path), "no prediction lines in this file")
    return predictions


def attach_golden(
    predictions: Sequence[Prediction], examples: Sequence[QAExample], path: str
) -> list[Prediction]:
    """Predictions with the golden answers and gold passages of their dataset examples.

    Answers written in the prediction line are replaced: the dataset file is the reference.
    """
    by_id = {ex.id: ex for ex in examples}
    by_question = {ex.question: ex for ex in examples}
    out = []
    for pred in predictions:
        ex = by_id.get(pred.id) or by_question.get(pred.question)
        if ex is None:
            raise DatasetError(
                f"{path}:{pred.line}",
                f"id {pred.id!r} (and its question) is not in the golden file",
            )
        out.append(replace(pred, golden_answers=ex.golden_answers, gold_passages=ex.gold_passages))
    return out
