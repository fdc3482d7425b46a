"""`ragraph run --input`: answers are matched to questions by id, so every line's id is unique or
the run refuses, naming the file and each shared id's lines, before any index or model loads.
Two lines with id "same" used to both get the second question's answer."""

from __future__ import annotations

import json
from pathlib import Path

from ragraph.cli import run_batch
from ragraph.cli.main import main
from ragraph.cli.run_input import BadLine, read_requests
from tests.cli.fake_search import use_fake_search

ONESHOT = str(Path(__file__).resolve().parents[2] / "workflows" / "oneshot.rag")


def lines(*rows: object) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)


def refused(tmp_path: Path, text: str, monkeypatch, capsys) -> str:  # noqa: ANN001
    """Run the file; the run must exit 2 without opening an index; its error message."""
    async def no_index(config, err):  # noqa: ANN001, ANN202
        raise AssertionError("an index was opened for an input that is refused")

    monkeypatch.setattr(run_batch, "open_run", no_index)
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text(text, encoding="utf-8")
    assert main(["run", ONESHOT, "-i", str(src), "-o", str(out), "--engine", "sim"]) == 2
    assert not out.exists()
    return capsys.readouterr().err


def test_two_lines_with_one_id_are_refused_with_their_line_numbers(tmp_path, monkeypatch,
                                                                   capsys):
    err = refused(tmp_path, lines({"id": "a", "question": "q1"}, {"id": "same", "question": "q2"},
                                  {"id": "b", "question": "q3"}, {"id": "same", "question": "q4"}),
                  monkeypatch, capsys)
    assert f"{tmp_path / 'in.jsonl'}: 1 id(s) used by more than one line" in err
    assert "id 'same': line 2, line 4" in err


def test_a_number_and_its_text_are_the_same_id(tmp_path, monkeypatch, capsys):
    err = refused(tmp_path, lines({"id": 1, "question": "q1"}, {"id": "1", "question": "q2"}),
                  monkeypatch, capsys)
    assert "id '1': line 1 (as 1), line 2; 1 and \"1\" are the same id" in err


def test_a_line_without_id_is_named_by_its_number_and_that_name_is_checked_too(
        tmp_path, monkeypatch, capsys):
    err = refused(tmp_path, lines({"question": "q1"}, {"id": "line-1", "question": "q2"}),
                  monkeypatch, capsys)
    assert "id 'line-1': line 1 (no id, so named line-1), line 2" in err


def test_bad_lines_count_among_the_ids(tmp_path, monkeypatch, capsys):
    # A bad line is still a line of the output, found by its id (on --resume, too).
    err = refused(tmp_path, lines({"id": "x", "question": ""}, {"id": "x", "question": "q"},
                                  "not json", {"id": "line-3", "question": "q"}),
                  monkeypatch, capsys)
    assert "id 'x': line 1, line 2" in err and "id 'line-3': line 3 (no id" in err


def test_ids_without_id_are_line_numbers_not_paths(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text(lines({"question": "q1"}, "", {"id": None, "question": "q2"}, [1, 2]),
                   encoding="utf-8")
    items = read_requests(src)
    assert [i.id for i in items] == ["line-1", "line-3", "line-4"]
    assert isinstance(items[2], BadLine) and "expected a JSON object" in items[2].error


def test_a_line_that_is_not_utf8_is_that_lines_error(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_bytes(b'{"id": "a", "question": "q"}\n{"id": "b", "question": "\xff"}\n')
    items = read_requests(src)
    assert items[0].id == "a" and not isinstance(items[0], BadLine)
    assert isinstance(items[1], BadLine) and "in.jsonl:2: not UTF-8" in items[1].error


def test_unique_ids_run(tmp_path, monkeypatch):
    use_fake_search(monkeypatch)
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text(lines({"id": 1, "question": "q1"}, {"id": "2", "question": "q2"},
                         {"question": "q3"}), encoding="utf-8")
    assert main(["run", ONESHOT, "-i", str(src), "-o", str(out), "--engine", "sim"]) == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [(r["id"], r["question"]) for r in rows] == [("1", "q1"), ("2", "q2"), ("line-3", "q3")]
