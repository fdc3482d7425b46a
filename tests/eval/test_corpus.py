"""Corpus loaders give unique {title, text} passages from every corpus layout in ../shared/data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragraph.eval.corpus import CorpusPassage, load_corpus
from ragraph.eval.datasets import DatasetError


def test_hotpotqa_corpus_joins_sentences(data_dir: Path) -> None:
    passages = load_corpus(data_dir / "hotpotqa_train_corpus.json")
    assert len(passages) == 994
    assert passages[0].title == "Demon Dice"
    # The sentences keep their own leading spaces: joined, they read as the original paragraph.
    assert "Tim Brown. In it, each player" in passages[0].text


@pytest.mark.parametrize(
    ("name", "count", "first_title"),
    [
        ("musique_train_corpus.json", 1890, "Journal of Mathematical Physics"),
        ("2wikimultihopqa_corpus.json", 6119, "Teutberga"),
    ],
)
def test_list_corpora(data_dir: Path, name: str, count: int, first_title: str) -> None:
    passages = load_corpus(data_dir / name)
    assert len(passages) == count
    assert passages[0].title == first_title
    assert all(p.text for p in passages)


def test_nq_oracle_gold_passages_are_deduplicated(data_dir: Path) -> None:
    passages = load_corpus(data_dir / "nq-open-oracle.jsonl.gz")
    assert len(passages) == 2600  # 2,655 questions share 2,600 passages
    assert len(set(passages)) == len(passages)
    assert passages[0].title == "List of Nobel laureates in Physics"


def test_limit_counts_unique_passages(data_dir: Path) -> None:
    assert len(load_corpus(data_dir / "2wikimultihopqa_corpus.json", limit=10)) == 10


def test_flashrag_contents_layout(tmp_path: Path) -> None:
    path = tmp_path / "wiki.jsonl"
    path.write_text(json.dumps({"id": "0", "contents": '"Rome"\nCapital of Italy.'}) + "\n")
    assert load_corpus(path) == [CorpusPassage("Rome", "Capital of Italy.")]


def test_bad_corpus_entry_is_located(tmp_path: Path) -> None:
    path = tmp_path / "corpus.json"
    path.write_text('{\n "A": ["One."],\n "B": 5\n}', encoding="utf-8")
    with pytest.raises(DatasetError, match=r"corpus\.json:3: error: entry 'B'"):
        load_corpus(path)
    path.write_text("[]", encoding="utf-8")
    with pytest.raises(DatasetError, match="no passages"):
        load_corpus(path)
