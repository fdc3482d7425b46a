"""`ragraph eval`: the table and JSON a user reads, and exit status 2 with a located message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragraph.cli.main import main

LINES = [
    {
        "id": "a",
        "question": "who sang help",
        "answer": "The Beatles",
        "golden_answers": ["Beatles"],
        "workflow": "oneshot",
        "passages": [{"id": 3, "title": "The Beatles", "text": "An English rock band."}],
    },
    {
        "id": "b",
        "question": "when",
        "prediction": "in 1990 or so",
        "golden_answers": ["1990"],
        "workflow": "oneshot",
    },
    {
        "id": "c",
        "question": "who",
        "error": "engine died",
        "golden_answers": ["x"],
        "workflow": "hyde",
    },
]


def _write(tmp_path: Path, lines: list[dict], name: str = "out.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def test_table_groups_by_workflow_with_a_total(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "120")  # rich sizes the table to the terminal; keep cells whole
    assert main(["eval", str(_write(tmp_path, LINES))]) == 0
    out = capsys.readouterr().out
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") > 5}
    assert set(rows) == {"oneshot", "hyde", "all"}
    cells = [c.strip() for c in rows["oneshot"].split("│")[2:-1]]
    # count, errors, EM, F1 (1.0 and 0.4), Sub-EM, answer recall, gold-passage recall (no gold)
    assert cells == ["2", "0", "50.0", "70.0", "100.0", "100.0", "–"]
    assert [c.strip() for c in rows["hyde"].split("│")[2:7]] == ["1", "1", "0.0", "0.0", "0.0"]
    assert [c.strip() for c in rows["all"].split("│")[2:5]] == ["3", "1", "33.3"]


def test_json_output(tmp_path: Path, capsys) -> None:
    assert main(["eval", str(_write(tmp_path, LINES)), "--json", "--k", "1"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["group"] for r in rows] == ["oneshot", "hyde", "all"]
    assert rows[0]["em"] == 0.5 and rows[0]["f1"] == pytest.approx(0.7)
    assert rows[2] | {"f1": None} == {
        "group": "all",
        "count": 3,
        "errors": 1,
        "scored": 3,
        "em": pytest.approx(1 / 3),
        "f1": None,
        "substring_em": pytest.approx(2 / 3),
        "answer_recall": 1.0,
        "passage_recall": None,
        "k": 1,
    }


def test_golden_file_supplies_answers_and_gold_passages(tmp_path: Path, capsys) -> None:
    golden = tmp_path / "musique.json"
    golden.write_text(
        json.dumps(
            [
                {
                    "id": "m1",
                    "question": "q1",
                    "answer": "G. Stanley Hall",
                    "answer_aliases": ["Stanley Hall"],
                    "paragraphs": [
                        {
                            "title": "Adolescence",
                            "paragraph_text": "By G. Stanley Hall.",
                            "is_supporting": True,
                        },
                        {"title": "Other", "paragraph_text": "Unrelated.", "is_supporting": True},
                    ],
                }
            ]
        ),
        encoding="utf-8",
    )
    preds = _write(
        tmp_path,
        [
            {
                "id": "renamed",
                "question": "q1",
                "answer": "Stanley Hall",
                "passages": [{"title": "Adolescence", "text": "By G. Stanley Hall."}],
            }
        ],
    )
    assert main(["eval", str(preds), "--golden", str(golden), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["em"], row["answer_recall"], row["passage_recall"]) == (1.0, 1.0, 0.5)


def test_without_golden_answers_says_how_to_score(tmp_path: Path, capsys) -> None:
    path = _write(tmp_path, [{"id": "a", "question": "q", "answer": "x"}])
    assert main(["eval", str(path)]) == 0
    assert "--golden" in capsys.readouterr().out


def test_bad_line_exits_2_naming_file_line_and_field(tmp_path: Path, capsys) -> None:
    path = _write(tmp_path, [LINES[0], {"id": "z", "question": "q", "answer": 3}])
    assert main(["eval", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:2: error: field 'answer': expected a string, got a number" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("lines", "extra", "message"),
    [
        ([{"id": "a", "question": "q"}], [], "missing field 'answer'"),
        ([{"question": "q", "answer": "x"}], [], "missing field 'id'"),
        ([], [], "no prediction lines"),
        ([{"id": "a", "question": "q", "answer": "x"}], ["--k", "0"], "--k: must be at least 1"),
    ],
)
def test_other_bad_inputs_exit_2(tmp_path: Path, capsys, lines, extra, message) -> None:
    assert main(["eval", str(_write(tmp_path, lines)), *extra]) == 2
    assert message in capsys.readouterr().err


def test_unknown_question_in_golden_file_exits_2(tmp_path: Path, capsys) -> None:
    golden = _write(
        tmp_path, [{"id": "g", "question": "other", "golden_answers": ["a"]}], "g.jsonl"
    )
    preds = _write(tmp_path, [{"id": "a", "question": "q", "answer": "x"}])
    assert main(["eval", str(preds), "--golden", str(golden)]) == 2
    assert f"{preds}:1: error: id 'a'" in capsys.readouterr().err


def test_missing_predictions_file_exits_2(tmp_path: Path, capsys) -> None:
    assert main(["eval", str(tmp_path / "absent.jsonl")]) == 2
    assert "no such file" in capsys.readouterr().err
