"""Answer and retrieval metrics with the conventions of FlashRAG and the SQuAD / NQ-open scripts.

Answers are compared after `normalize_answer` (lowercase, drop ASCII punctuation, drop the articles
a/an/the, collapse whitespace), each metric takes the best score over the golden answers, and the
per-example scores are averaged by the caller. Differences from FlashRAG are deliberate and noted
where they occur.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
# FlashRAG's F1 never gives partial credit to a closed-class answer: a yes/no/noanswer on either side
# scores only when both sides are the same word (HotpotQA's official script does the same).
_CLOSED_ANSWERS = frozenset({"yes", "no", "noanswer"})


def normalize_answer(text: str) -> str:
    """SQuAD normalization: lowercase, remove punctuation, then articles, then extra whitespace.

    The order matters and is the reference one: punctuation goes first, so "the-end" becomes
    "theend" (no article) while "the end" becomes "end".
    """
    lowered = text.lower()
    no_punct = "".join(ch for ch in lowered if ch not in _PUNCTUATION)
    no_articles = _ARTICLES.sub(" ", no_punct)
    return " ".join(no_articles.split())


def _as_list(golden_answers: str | Iterable[str]) -> list[str]:
    # FlashRAG accepts a bare string for a single answer; so do we, rather than iterating characters.
    if isinstance(golden_answers, str):
        return [golden_answers]
    return list(golden_answers)


def exact_match(prediction: str, golden_answers: str | Iterable[str]) -> float:
    """1.0 when the normalized prediction equals some normalized golden answer, else 0.0."""
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(g) for g in _as_list(golden_answers)))


def substring_match(prediction: str, golden_answers: str | Iterable[str]) -> float:
    """FlashRAG's "acc" (cover-EM): some normalized golden answer occurs in the normalized prediction.

    The test is a plain substring test, as in FlashRAG ("1" is found in "1990"). One deviation: a
    golden answer that normalizes to "" (e.g. "The") would be "in" every prediction, so it only
    matches an empty prediction.
    """
    pred = normalize_answer(prediction)
    return float(any(_contains(pred, normalize_answer(g)) for g in _as_list(golden_answers)))


def _contains(haystack: str, needle: str) -> bool:
    return needle in haystack if needle else haystack == ""


@dataclass(frozen=True)
class TokenScores:
    """Token-overlap scores of a prediction against its best-matching golden answers."""

    f1: float = 0.0
    precision: float = 0.0
    recall: float = 0.0


def token_scores(prediction: str, golden_answers: str | Iterable[str]) -> TokenScores:
    """Token precision/recall/F1, each maximized over the golden answers as FlashRAG does.

    A yes/no/noanswer on either side only scores against the identical word; no overlap scores 0
    (so an empty prediction scores 0 even against an empty answer, unlike SQuAD v2).
    """
    pred = normalize_answer(prediction)
    best = TokenScores()
    for golden in _as_list(golden_answers):
        gold = normalize_answer(golden)
        if (pred in _CLOSED_ANSWERS or gold in _CLOSED_ANSWERS) and pred != gold:
            continue
        score = _overlap(pred.split(), gold.split())
        best = TokenScores(
            f1=max(best.f1, score.f1),
            precision=max(best.precision, score.precision),
            recall=max(best.recall, score.recall),
        )
    return best


def _overlap(pred_tokens: list[str], gold_tokens: list[str]) -> TokenScores:
    same = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
    if same == 0:
        return TokenScores()
    precision = same / len(pred_tokens)
    recall = same / len(gold_tokens)
    return TokenScores(2 * precision * recall / (precision + recall), precision, recall)


def f1_score(prediction: str, golden_answers: str | Iterable[str]) -> float:
    """Token F1, maximized over the golden answers (FlashRAG's "f1")."""
    return token_scores(prediction, golden_answers).f1


class PassageLike(Protocol):
    """Anything with a title and a text; `id` is read when present (retrieved passages have one)."""

    @property
    def title(self) -> str: ...

    @property
    def text(self) -> str: ...


MatchBy = Literal["auto", "id", "text", "title"]


def answer_recall_at_k(
    passages: Sequence[PassageLike | str], golden_answers: str | Iterable[str], k: int | None = None
) -> float:
    """FlashRAG's "retrieval recall": 1.0 when some golden answer occurs in one of the top-k passages.

    A passage is searched as its title and text together (FlashRAG's `contents` field holds both).
    `k=None` searches every passage given.
    """
    golds = [normalize_answer(g) for g in _as_list(golden_answers)]
    golds = [g for g in golds if g]  # an empty answer would be found in every passage
    for passage in _top(passages, k):
        contents = normalize_answer(_contents(passage))
        if any(g in contents for g in golds):
            return 1.0
    return 0.0


def _contents(passage: PassageLike | str) -> str:
    if isinstance(passage, str):
        return passage
    return f"{passage.title}\n{passage.text}"


def _top(items: Sequence, k: int | None) -> Sequence:
    if k is not None and k < 1:
        raise ValueError(f"k: must be at least 1, got {k}")
    return items if k is None else items[:k]


def passage_recall_at_k(
    retrieved: Sequence[PassageLike],
    gold: Sequence[PassageLike],
    k: int | None = None,
    by: MatchBy = "auto",
) -> float:
    """The fraction of gold passages that appear among the top-k retrieved passages.

    Passages are identified by `id` when every passage on both sides has one ("auto"), otherwise by
    normalized text; `by="title"` matches on normalized titles, for corpora that chunk articles
    differently from the gold annotation (HotpotQA's supporting facts name titles).
    """
    if not gold:
        raise ValueError("gold: recall needs at least one gold passage")
    top = _top(retrieved, k)
    mode = _resolve_mode(by, top, gold)
    found = {_key(p, mode) for p in top}
    gold_keys = {_key(p, mode) for p in gold}
    return len(gold_keys & found) / len(gold_keys)


def _resolve_mode(
    by: MatchBy, retrieved: Sequence[PassageLike], gold: Sequence[PassageLike]
) -> str:
    if by != "auto":
        return by
    has_ids = all(getattr(p, "id", None) is not None for p in (*retrieved, *gold))
    return "id" if has_ids else "text"


def _key(passage: PassageLike, mode: str) -> object:
    if mode == "id":
        ident = getattr(passage, "id", None)
        if ident is None:
            raise ValueError(f"by='id': passage {passage.title!r} has no id")
        return str(ident)
    if mode == "title":
        return normalize_answer(passage.title)
    return normalize_answer(passage.text)


def mean(values: Sequence[float]) -> float | None:
    """The average, or None for no values (a column that cannot be computed, not a zero)."""
    return sum(values) / len(values) if values else None
