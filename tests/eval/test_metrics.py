"""Metric values a user would compare with FlashRAG's and the SQuAD / NQ-open scripts' numbers."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from ragraph.eval.metrics import (
    answer_recall_at_k,
    exact_match,
    f1_score,
    mean,
    normalize_answer,
    passage_recall_at_k,
    substring_match,
    token_scores,
)


@dataclass(frozen=True)
class P:
    title: str
    text: str
    id: str | None = None


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("The Beatles", "beatles"),
        ("  A  Tale of Two   Cities. ", "tale of two cities"),
        ("U.S.A.", "usa"),
        ("Wilhelm Conrad Röntgen", "wilhelm conrad röntgen"),  # non-ASCII letters are kept
        ("the-end", "theend"),  # punctuation goes before articles are removed
        ("theatre anthem", "theatre anthem"),  # articles only as whole words
        ("An apple, a day!", "apple day"),
        ("“quoted”", "“quoted”"),  # only ASCII punctuation is removed, as in SQuAD
        ("THE", ""),
        ("", ""),
    ],
)
def test_normalize_answer_matches_squad(raw: str, normalized: str) -> None:
    assert normalize_answer(raw) == normalized


def test_exact_match_takes_the_best_golden_answer() -> None:
    assert exact_match("the beatles!", ["Rolling Stones", "Beatles"]) == 1.0
    assert exact_match("Beatles band", ["Beatles"]) == 0.0
    assert exact_match("Paris", "paris") == 1.0  # a bare string is one answer, not characters
    assert exact_match("p", "paris") == 0.0


def test_f1_token_overlap_and_max_over_answers() -> None:
    # pred tokens [in, 1990, or, so]: precision 1/4, recall 1 -> F1 0.4
    assert f1_score("in 1990 or so", ["1990"]) == pytest.approx(0.4)
    assert f1_score("John Smith", ["Smith", "John Smith Jr"]) == pytest.approx(0.8)
    scores = token_scores("John Smith", ["Smith", "John Smith Jr"])
    # FlashRAG keeps each maximum separately: precision from the second answer, recall from the first.
    assert (scores.precision, scores.recall) == (1.0, 1.0)
    assert f1_score("nothing shared", ["Beatles"]) == 0.0


def test_f1_repeated_tokens_count_once_per_occurrence() -> None:
    # common = min(count) per token: "new" once in gold -> 1 shared of 3 predicted
    assert f1_score("new new york", ["new jersey"]) == pytest.approx(
        2 * (1 / 3) * (1 / 2) / (1 / 3 + 1 / 2)
    )


def test_f1_yes_no_only_score_against_the_same_word() -> None:
    assert f1_score("yes", ["yes"]) == 1.0
    assert f1_score("Yes.", ["no"]) == 0.0
    assert f1_score("yes it is", ["yes"]) == 0.0  # FlashRAG: no partial credit on a closed answer
    assert f1_score("no", ["no way out"]) == 0.0
    assert f1_score("noanswer", ["noanswer"]) == 1.0


def test_f1_empty_prediction_scores_zero() -> None:
    assert f1_score("", ["the"]) == 0.0
    assert f1_score("", ["Beatles"]) == 0.0


def test_substring_match_is_flashrag_acc() -> None:
    assert substring_match("It was the Beatles, of course.", ["Beatles"]) == 1.0
    assert substring_match("in 1990", ["1990", "nineteen ninety"]) == 1.0
    assert substring_match("1990s", ["1990"]) == 1.0  # plain substring, as in FlashRAG
    assert substring_match("Rolling Stones", ["Beatles"]) == 0.0


def test_substring_match_ignores_answers_that_normalize_to_nothing() -> None:
    assert substring_match("anything at all", ["The"]) == 0.0
    assert substring_match("a", ["The"]) == 1.0


def test_answer_recall_at_k_searches_title_and_text() -> None:
    passages = [P("Rome", "Capital of Italy."), P("The Beatles", "A band from Liverpool.")]
    assert answer_recall_at_k(passages, ["Beatles"]) == 1.0
    assert answer_recall_at_k(passages, ["Beatles"], k=1) == 0.0
    assert answer_recall_at_k(["raw text mentioning 1990"], ["1990"]) == 1.0
    assert answer_recall_at_k(passages, ["The"]) == 0.0
    with pytest.raises(ValueError, match="k"):
        answer_recall_at_k(passages, ["x"], k=0)


def test_passage_recall_by_id_when_every_passage_has_one() -> None:
    retrieved = [P("a", "x", "1"), P("b", "y", "2"), P("c", "z", "3")]
    gold = [P("B", "different text", "2"), P("D", "w", "9")]
    assert passage_recall_at_k(retrieved, gold) == 0.5
    assert passage_recall_at_k(retrieved, gold, k=1) == 0.0


def test_passage_recall_by_normalized_text_without_ids() -> None:
    retrieved = [P("Alû", "In Akkadian mythology, Alû is a spirit.", "7")]
    gold = [P("Alû", "in akkadian mythology alû is spirit"), P("Lilu", "A lilu is a spirit.")]
    assert passage_recall_at_k(retrieved, gold) == 0.5
    assert passage_recall_at_k(retrieved, gold, by="title") == 0.5
    with pytest.raises(ValueError, match="gold"):
        passage_recall_at_k(retrieved, [])


def test_mean_of_nothing_is_none() -> None:
    assert mean([]) is None
    assert mean([1.0, 0.0]) == 0.5
