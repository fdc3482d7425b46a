"""`ragraph run --input --output` survives a kill: each answer is on disk (fsync'd) as it
finishes, `--resume` runs only what is missing, and the finished file is in input order. Text
UTF-8 cannot hold never costs a line. Before, the output was written once at the end: SIGKILL at
60% left no file, and a lone surrogate in one question crashed the writer with a half file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ragraph.cli.main import main
from ragraph.cli.run_output import answered, encode
from ragraph.errors import ConfigError
from tests.cli.fake_search import use_fake_search
from tests.cli.outputs import finished_rows, read_rows, wait_for_lines
from tests.processes import stop

REPO = Path(__file__).resolve().parents[2]
ONESHOT = str(REPO / "workflows" / "oneshot.rag")
SIM = ("--engine", "sim")


def write_questions(path: Path, n: int) -> list[str]:
    ids = [f"q{i}" for i in range(n)]
    path.write_text("".join(json.dumps({"id": rid, "question": f"What is topic {i}?"}) + "\n"
                            for i, rid in enumerate(ids)), encoding="utf-8")
    return ids


def answers(path: Path) -> dict[str, str]:
    return {r["id"]: r["answer"] for r in read_rows(path)}


def test_a_killed_run_resumes_and_answers_every_id_once_as_an_uninterrupted_run(tmp_path):
    from tests.serve.servers import slow_profile

    src, out, whole = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "whole.jsonl"
    ids = write_questions(src, 80)
    # Steps of 20 ms: a request takes ~0.5 s and the run ~10 s, so the kill lands mid-run.
    profile = slow_profile(tmp_path / "slow.json", step_ms=20.0)
    killed = ragraph_run(src, out, "-c", "4", "--profile", str(profile))
    proc = subprocess.Popen(killed, cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        wait_for_lines(out, 6, proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        stop(proc)
    journal = finished_rows(out)
    assert 6 <= len(journal) < len(ids), "the kill did not land mid-run"
    assert all("answer" in r for r in journal)

    # The rest at another concurrency and the default step times: the sim's text depends on
    # neither, only on the prompt.
    resumed = subprocess.run(ragraph_run(src, out, "-c", "16", "--resume"), cwd=REPO,
                             capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"{len(journal)} of {len(ids)} already answered" in resumed.stderr
    rows = read_rows(out)
    assert [r["id"] for r in rows] == ids  # each id once, in input order
    assert all(rows[ids.index(r["id"])] == r for r in journal)  # kept, not run again
    subprocess.run(ragraph_run(src, whole, "-c", "16"), cwd=REPO, check=True,
                   capture_output=True, timeout=300)
    assert answers(out) == answers(whole)


def ragraph_run(src: Path, out: Path, *argv: str) -> list[str]:
    """`ragraph run` of oneshot on the simulated engine over the in-memory search."""
    return [sys.executable, "-m", "tests.cli.fake_search", "run", ONESHOT, "-i", str(src),
            "-o", str(out), *SIM, *argv]


def test_a_lone_surrogate_gets_its_own_line_and_the_others_are_answered(tmp_path, monkeypatch):
    use_fake_search(monkeypatch)
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text('{"id": "a", "question": "first"}\n'
                   '{"id": "bad", "question": "half a pair \\ud800 here"}\n'
                   '{"id": "c", "question": "caf\\u00e9 last"}\n', encoding="utf-8")
    assert main(["run", ONESHOT, "-i", str(src), "-o", str(out), *SIM]) == 0
    rows = read_rows(out)
    assert [r["id"] for r in rows] == ["a", "bad", "c"]
    assert rows[1]["question"] == "half a pair \ud800 here"
    assert "answer" in rows[1] or rows[1]["error"]
    assert rows[0]["answer"] and rows[2]["answer"]
    assert "café" in out.read_text(encoding="utf-8")  # only the surrogate's line is escaped


@pytest.mark.parametrize("text", ["\ud800", "a\udfffb", "\ud83d", "plain", "é \U0001f600"])
def test_every_line_is_utf8_and_reads_back_as_written(text):
    row = {"id": "x", "question": text, "error": f"about {text}"}
    line = encode(row)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line.decode("utf-8")) == row


def journal_of(path: Path, *rows: dict, torn: str = "") -> None:
    path.write_bytes(b"".join(encode(r) for r in rows) + torn.encode())


def test_resume_keeps_answers_and_runs_failures_and_a_torn_line_again(tmp_path, monkeypatch):
    use_fake_search(monkeypatch)
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    ids = write_questions(src, 4)
    journal_of(out, {"id": "q2", "question": "What is topic 2?", "answer": "kept"},
               {"id": "q0", "question": "What is topic 0?", "error": "engine down",
                "error_kind": "engine"},
               torn='{"id": "q1", "question": "What is topic 1?", "answ')
    assert main(["run", ONESHOT, "-i", str(src), "-o", str(out), *SIM, "--resume"]) == 0
    rows = read_rows(out)
    assert [r["id"] for r in rows] == ids
    assert rows[2]["answer"] == "kept"
    assert all(r["answer"] and r["answer"] != "kept" for i, r in enumerate(rows) if i != 2)


def test_resume_refuses_the_output_of_another_input(tmp_path):
    out = tmp_path / "out.jsonl"
    journal_of(out, {"id": "q0", "question": "What is topic 0?", "answer": "a"},
               {"id": "q9", "question": "elsewhere", "answer": "b"})
    with pytest.raises(ConfigError, match=r"out.jsonl:2: id 'q9' with this question is not"):
        answered(out, {"q0": "What is topic 0?", "q1": "What is topic 1?"})
    with pytest.raises(ConfigError, match=r"out.jsonl:2: id 'q9' with this question is not"):
        answered(out, {"q0": "What is topic 0?", "q9": "another question"})


def test_a_broken_line_before_the_last_is_not_taken_for_a_torn_one(tmp_path):
    out = tmp_path / "out.jsonl"
    out.write_text('{"id": "q0", "answer": "a"}\n{"id": "q1", "ans\n{"id": "q2"}\n',
                   encoding="utf-8")
    with pytest.raises(ConfigError, match=r"out.jsonl:2: not a line ragraph wrote"):
        answered(out, {"q0": None, "q1": None, "q2": None})


def test_resume_with_everything_answered_opens_no_engine(tmp_path, monkeypatch, capsys):
    from ragraph.cli import run_batch

    async def no_index(config, err):  # noqa: ANN001, ANN202
        raise AssertionError("an index was opened with nothing left to run")

    monkeypatch.setattr(run_batch, "open_run", no_index)
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_questions(src, 2)
    journal_of(out, {"id": "q1", "question": "What is topic 1?", "answer": "b"},
               {"id": "q0", "question": "What is topic 0?", "answer": "a"})
    assert main(["run", ONESHOT, "-i", str(src), "-o", str(out), *SIM, "--resume"]) == 0
    assert [r["answer"] for r in read_rows(out)] == ["a", "b"]
    assert "nothing left to run: 2 of 2 already answered" in capsys.readouterr().err


def test_resume_needs_an_output(tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    write_questions(src, 1)
    assert main(["run", ONESHOT, "-i", str(src), *SIM, "--resume"]) == 2
    assert "--resume: needs --output" in capsys.readouterr().err


def test_the_journal_is_synced_line_by_line(tmp_path, monkeypatch):
    """Each finished request's line is fsync'd before the next one is recorded."""
    from ragraph.cli import run_output

    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(run_output.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    journal = run_output.Journal(tmp_path / "out.jsonl", kept=[])
    before = len(synced)
    journal.append({"id": "a", "answer": "x"})
    journal.append({"id": "b", "answer": "y"})
    journal.close()
    assert len(synced) - before == 2
    assert [r["id"] for r in read_rows(tmp_path / "out.jsonl")] == ["a", "b"]


def test_output_may_not_be_the_input(tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    write_questions(src, 1)
    text = src.read_text(encoding="utf-8")
    assert main(["run", ONESHOT, "-i", str(src), "-o", str(tmp_path / "." / "in.jsonl"),
                 *SIM]) == 2
    assert "is the --input file" in capsys.readouterr().err
    assert src.read_text(encoding="utf-8") == text
