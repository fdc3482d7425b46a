"""`ragraph run` end to end as a user types it: a real index built from a tiny corpus with the real
embedder, the simulated engine (fast, labelled), JSONL in and out, and located errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragraph.cli.main import main

WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"
TOPICS = {
    "Eiffel Tower": "The Eiffel Tower in Paris was designed by the company of Gustave Eiffel.",
    "Violin": "The violin is a wooden string instrument played with a bow.",
    "Glacier": "A glacier is a persistent body of dense ice that moves under its own weight.",
    "Chess": "Chess is a board game for two players on a checkered board of 64 squares.",
}


def corpus_index(root: Path, copies: int, *flags: str) -> Path:
    """An index of TOPICS, each `copies` times, built by `ragraph index build --corpus`."""
    pytest.importorskip("faiss")
    corpus = root / "corpus.jsonl"
    corpus.write_text("".join(
        json.dumps({"title": t, "text": f"{x} ({n})"}) + "\n"
        for n in range(copies) for t, x in TOPICS.items()), encoding="utf-8")
    out = root / "index"
    assert main(["index", "build", "--corpus", str(corpus), "--out", str(out), *flags]) == 0
    return out


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> Path:
    return corpus_index(tmp_path_factory.mktemp("run"), 4, "--nlist", "4")


@pytest.mark.slow  # the index is built with the real embedder
def test_input_file_gives_one_line_per_request_and_keeps_going(index, tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    src.write_text(
        '{"id": "a", "question": "Who designed the Eiffel Tower?", "golden_answers": ["Eiffel"]}\n'
        '{"id": "b", "question": ""}\n'
        "not json\n"
        '{"id": "c", "question": "What is played with a bow?"}\n', encoding="utf-8")
    out = tmp_path / "out.jsonl"
    # oneshot retrieves with the question itself: the simulated engine's text does not matter.
    code = main(["run", str(WORKFLOWS / "oneshot.rag"), "--input", str(src), "--output", str(out),
                 "--engine", "sim", "--index", str(index), "--nprobe", "4"])
    assert code == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == ["a", "b", "line-3", "c"]
    assert rows[0]["answer"] and rows[3]["answer"]
    assert rows[0]["passages"][0]["title"] == "Eiffel Tower"
    assert "in.jsonl:2: question" in rows[1]["error"]
    assert "in.jsonl:3: not JSON" in rows[2]["error"]
    shown = capsys.readouterr()
    assert "SIMULATED" in shown.out + shown.err
    assert "EM / F1" in shown.out


@pytest.mark.slow  # the index is built with the real embedder
def test_single_question_verbose_shows_path_and_passages(index, capsys):
    code = main(["run", str(WORKFLOWS / "oneshot.rag"), "-q", "Which game has 64 squares?",
                 "--engine", "sim", "--index", str(index), "--nprobe", "4", "--verbose",
                 "--executor", "sequential"])
    assert code == 0
    out = capsys.readouterr().out
    assert "passages" in out and "Chess" in out and "path" in out and "END" in out
    # The scheduler's speculation counters (a thread pool speculates on nothing).
    assert "speculation: started 0, adopted 0, rolled back 0" in out


@pytest.mark.parametrize("argv, message", [
    (["--passes", "split-stagez"], "split-stagez"),
    (["--index", "/nonexistent/index"], "/nonexistent/index"),
    (["--concurrency", "0"], "concurrency"),
])
def test_bad_settings_exit_2_naming_the_place(argv, message, capsys):
    code = main(["run", str(WORKFLOWS / "hyde.rag"), "-q", "x", "--engine", "sim", *argv])
    assert code == 2
    assert message in capsys.readouterr().err


def test_bad_workflow_file_is_located(tmp_path, capsys):
    bad = tmp_path / "bad.rag"
    bad.write_text("input question\ngenerate a -> answer: \"{questoin}\"\n", encoding="utf-8")
    assert main(["run", str(bad), "-q", "x", "--engine", "sim"]) == 2
    assert "bad.rag:2:" in capsys.readouterr().err
