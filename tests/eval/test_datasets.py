"""Loaders on the real files in ../shared/data, format detection, and errors that point at a line."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from ragraph.errors import RagraphError
from ragraph.eval.datasets import DatasetError, GoldPassage, QAExample, iter_dataset, load_dataset


def test_nq_oracle(data_dir: Path) -> None:
    examples = load_dataset(data_dir / "nq-open-oracle.jsonl.gz")
    assert len(examples) == 2655
    first = examples[0]
    assert first.id == "nq-oracle-0"
    assert first.question == "who got the first nobel prize in physics"
    assert first.golden_answers == ("Wilhelm Conrad Röntgen",)
    assert first.gold_passages[0].title == "List of Nobel laureates in Physics"
    assert all(len(ex.gold_passages) == 1 for ex in examples)


def test_nq_open_dev(data_dir: Path) -> None:
    examples = load_dataset(data_dir / "nq-open-dev.jsonl")
    assert len(examples) == 3610
    assert examples[0].golden_answers == ("14 December 1972 UTC", "December 1972")
    assert examples[0].gold_passages == ()
    assert examples[-1].id == "nq-open-3609"


def test_hotpotqa_gold_passages_come_from_supporting_titles(data_dir: Path) -> None:
    examples = load_dataset(data_dir / "hotpotqa_train.json")
    assert len(examples) == 100
    first = examples[0]
    assert first.id == "5a77ec115542992a6e59dff7"
    assert first.golden_answers == ("a spirit",)
    assert [p.title for p in first.gold_passages] == ["Alû", "Lilu (mythology)"]
    assert first.gold_passages[1].text.startswith("A lilu or lilû is a masculine Akkadian word")
    assert first.metadata["type"] == "bridge"
    assert all(1 <= len(ex.gold_passages) <= 4 for ex in examples)


def test_musique_answers_include_aliases_and_supporting_paragraphs(data_dir: Path) -> None:
    examples = load_dataset(data_dir / "musique_train.json")
    assert len(examples) == 100
    first = examples[0]
    assert first.id == "2hop__150763_14904"
    assert first.golden_answers == ("G. Stanley Hall", "Stanley Hall")
    assert [p.title for p in first.gold_passages] == [
        "Journal of Psychotherapy Integration",
        "Adolescence",
    ]
    assert all(ex.gold_passages for ex in examples)


def test_limit_stops_early(data_dir: Path) -> None:
    assert [ex.id for ex in load_dataset(data_dir / "nq-open-dev.jsonl", limit=3)] == [
        "nq-open-0",
        "nq-open-1",
        "nq-open-2",
    ]
    assert len(load_dataset(data_dir / "musique_train.json", limit=5)) == 5
    assert load_dataset(data_dir / "hotpotqa_train.json", limit=0) == []


def _write(path: Path, lines: list[object]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def test_flashrag_jsonl(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "test.jsonl",
        [
            {"id": "test_0", "question": "q?", "golden_answers": ["a", "b"], "metadata": {"x": 1}},
            {"id": 7, "question": "r?", "golden_answers": []},
        ],
    )
    examples = load_dataset(path)
    assert examples[0] == QAExample("test_0", "q?", ("a", "b"))
    assert examples[0].metadata == {"x": 1}
    assert examples[1].id == "7"


def test_format_is_detected_from_content_not_name(tmp_path: Path) -> None:
    path = tmp_path / "questions.data"
    with gzip.open(tmp_path / "renamed.jsonl.gz", "wt", encoding="utf-8") as fh:
        fh.write(json.dumps({"question": "q", "answers": ["a"], "ctxs": []}) + "\n")
    _write(path, [{"question": "q", "answer": ["a"]}])
    assert load_dataset(path)[0].id == "nq-open-0"
    assert load_dataset(tmp_path / "renamed.jsonl.gz")[0].id == "nq-oracle-0"
    assert load_dataset(path, fmt="nq-open")[0].golden_answers == ("a",)


def test_corpus_file_is_refused_with_a_hint(data_dir: Path) -> None:
    with pytest.raises(DatasetError, match="load_corpus"):
        load_dataset(data_dir / "hotpotqa_train_corpus.json")
    with pytest.raises(DatasetError, match="load_corpus"):
        load_dataset(data_dir / "musique_train_corpus.json")


def test_bad_jsonl_line_names_file_line_and_field(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "bad.jsonl",
        [
            {"id": "1", "question": "q", "golden_answers": ["a"]},
            {"id": "2", "question": "q", "golden_answers": "a"},
        ],
    )
    with pytest.raises(DatasetError) as info:
        load_dataset(path)
    assert (
        str(info.value) == f"{path}:2: error: field 'golden_answers': expected a list, got a string"
    )
    assert isinstance(info.value, RagraphError)


def test_invalid_json_and_missing_field_are_located(tmp_path: Path) -> None:
    path = tmp_path / "broken.jsonl"
    path.write_text('{"question": "q", "answer": ["a"]}\n\n{"question": "q", \n', encoding="utf-8")
    with pytest.raises(DatasetError, match=r"broken\.jsonl:3: error: invalid JSON"):
        load_dataset(path)
    _write(path, [{"question": "q", "answer": ["a"]}, {"answer": ["b"]}])
    with pytest.raises(DatasetError, match=r"broken\.jsonl:2: error: missing field 'question'"):
        load_dataset(path)


def test_bad_element_of_a_json_array_is_reported_at_its_line(tmp_path: Path) -> None:
    good = {"id": "m1", "question": "q", "answer": "a", "answer_aliases": [], "paragraphs": []}
    bad = dict(good, id="m2", paragraphs=[{"title": "t", "paragraph_text": 3}])
    path = tmp_path / "musique.json"
    path.write_text(json.dumps([good, bad], indent=1), encoding="utf-8")
    lines = json.dumps([good, bad], indent=1).splitlines()
    line = [i for i, text in enumerate(lines, start=1) if text == " {"][1]  # where `bad` opens
    with pytest.raises(DatasetError) as info:
        load_dataset(path)
    assert str(info.value) == (
        f"{path}:{line}: error: field 'paragraphs[0]': "
        "field 'paragraph_text': expected a string, got a number"
    )


def test_hotpotqa_supporting_fact_must_name_a_context_title(tmp_path: Path) -> None:
    record = {
        "_id": "h1",
        "question": "q",
        "answer": "a",
        "supporting_facts": [["Missing", 0]],
        "context": [["Present", ["One.", " Two."]]],
    }
    path = tmp_path / "hotpot.json"
    path.write_text(json.dumps([record]), encoding="utf-8")
    with pytest.raises(DatasetError, match=r"hotpot\.json:1: .*'Missing' is not in 'context'"):
        load_dataset(path)
    record["supporting_facts"] = [["Present", 1]]
    path.write_text(json.dumps([record]), encoding="utf-8")
    assert load_dataset(path)[0].gold_passages == (GoldPassage("Present", "One. Two."),)


def test_unknown_format_and_missing_file(tmp_path: Path) -> None:
    path = _write(tmp_path / "x.jsonl", [{"foo": 1}])
    with pytest.raises(DatasetError, match=r"x\.jsonl:1: error: unknown dataset format"):
        load_dataset(path)
    with pytest.raises(DatasetError, match="no such file"):
        load_dataset(tmp_path / "absent.jsonl")
    with pytest.raises(DatasetError, match="unknown format 'squad'"):
        list(iter_dataset(path, fmt="squad"))


def test_duplicate_ids_are_refused(tmp_path: Path) -> None:
    line = {"id": "same", "question": "q", "golden_answers": ["a"]}
    with pytest.raises(DatasetError, match="duplicate example id 'same'"):
        load_dataset(_write(tmp_path / "dup.jsonl", [line, line]))
