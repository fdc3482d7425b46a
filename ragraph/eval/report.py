"""Scores of a prediction file, per workflow, as a rich table or JSON.

A request that failed (`error` set) still counts: it scores 0 on EM/F1/substring-EM when its golden
answers are known, since a user asked and got no answer. Recall columns average only the lines that
recorded their retrieved passages (and, for passage recall, whose dataset annotates gold passages).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

from rich.table import Table

from ragraph.eval.metrics import (
    answer_recall_at_k,
    exact_match,
    f1_score,
    mean,
    passage_recall_at_k,
    substring_match,
)
from ragraph.eval.predictions import Prediction

ALL = "all"


@dataclass(frozen=True)
class EvalSummary:
    """Averages over one group of predictions, as fractions in [0, 1]; None where not computable."""

    group: str
    count: int
    errors: int
    scored: int  # lines with golden answers
    em: float | None
    f1: float | None
    substring_em: float | None
    answer_recall: float | None
    passage_recall: float | None
    k: int | None  # None: every retrieved passage counts

    def to_json(self) -> dict:
        return asdict(self)


def _answer_scores(preds: Sequence[Prediction]) -> tuple[list[float], list[float], list[float]]:
    em, f1, sub = [], [], []
    for p in preds:
        if p.golden_answers is None:
            continue
        failed = p.error is not None
        em.append(0.0 if failed else exact_match(p.answer, p.golden_answers))
        f1.append(0.0 if failed else f1_score(p.answer, p.golden_answers))
        sub.append(0.0 if failed else substring_match(p.answer, p.golden_answers))
    return em, f1, sub


def _recalls(preds: Sequence[Prediction], k: int | None) -> tuple[list[float], list[float]]:
    answer, passage = [], []
    for p in preds:
        if p.passages is None:
            continue
        if p.golden_answers:
            answer.append(answer_recall_at_k(p.passages, p.golden_answers, k))
        if p.gold_passages:
            passage.append(passage_recall_at_k(p.passages, p.gold_passages, k))
    return answer, passage


def summarize_group(group: str, preds: Sequence[Prediction], k: int | None = None) -> EvalSummary:
    em, f1, sub = _answer_scores(preds)
    answer_recall, passage_recall = _recalls(preds, k)
    return EvalSummary(
        group=group,
        count=len(preds),
        errors=sum(1 for p in preds if p.error),
        scored=len(em),
        em=mean(em),
        f1=mean(f1),
        substring_em=mean(sub),
        answer_recall=mean(answer_recall),
        passage_recall=mean(passage_recall),
        k=k,
    )


def summarize(predictions: Sequence[Prediction], k: int | None = None) -> list[EvalSummary]:
    """One summary per workflow (in order of first appearance), then "all" when there are several."""
    groups: dict[str, list[Prediction]] = {}
    for p in predictions:
        groups.setdefault(p.workflow or ALL, []).append(p)
    rows = [summarize_group(name, preds, k) for name, preds in groups.items()]
    if len(rows) > 1:
        rows.append(summarize_group(ALL, predictions, k))
    return rows


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def render_table(rows: Sequence[EvalSummary], title: str = "QA evaluation") -> Table:
    """The table `ragraph eval` prints; scores in percent, "–" where a column cannot be computed."""
    at = "all" if not rows or rows[0].k is None else str(rows[0].k)
    caption = (
        f"Ans@{at}: a golden answer is in the top-{at} passages; Gold@{at}: share of gold passages "
        f"retrieved in the top-{at}. Failed requests score 0."
    )
    table = Table(title=title, caption=caption)
    table.add_column("workflow")
    for name in ("count", "errors", "EM", "F1", "Sub-EM", f"Ans@{at}", f"Gold@{at}"):
        table.add_column(name, justify="right")
    for i, row in enumerate(rows):
        is_total = row.group == ALL and len(rows) > 1
        table.add_row(
            row.group,
            str(row.count),
            str(row.errors),
            *(_pct(v) for v in (row.em, row.f1, row.substring_em)),
            _pct(row.answer_recall),
            _pct(row.passage_recall),
            style="bold" if is_total else None,
            end_section=i == len(rows) - 2 and len(rows) > 1,
        )
    return table
