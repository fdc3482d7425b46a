"""`--exact` (llama.cpp's serial-exact mode) on the embedded default (Gemma-3-270M and the
Wikipedia index): the same questions get the same answers from `ragraph run` at any concurrency,
from `ragraph serve` with concurrent clients, and from a run killed midway and resumed. The
batched default engine does not promise this (an answer can change with what it was batched
with); this mode does."""

from __future__ import annotations

import json
import signal
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.cli.outputs import finished_rows, read_rows, wait_for_lines
from tests.processes import ragraph, serve, stop
from tests.real import need_module

pytestmark = pytest.mark.slow  # the real model, embedder and default index

REPO = Path(__file__).resolve().parents[2]
HYDE = str(REPO / "workflows" / "hyde.rag")
QUESTIONS = ("Who designed the Eiffel Tower?", "What is the capital of Australia?",
             "Who painted the Mona Lisa?", "Who wrote Pride and Prejudice?",
             "Who discovered penicillin?", "What language is spoken in Brazil?",
             "What is the chemical symbol for gold?", "Who invented the telephone?")
IDS = [f"q{i}" for i in range(len(QUESTIONS))]


def run_exact(tmp: Path, name: str, *argv: str) -> dict[str, str]:
    out = tmp / f"{name}.jsonl"
    subprocess.run(ragraph("run", HYDE, "-i", str(questions(tmp)), "-o", str(out), "--exact",
                           *argv), check=True, cwd=REPO, capture_output=True, timeout=900)
    return answers(out)


def questions(tmp: Path) -> Path:
    src = tmp / "in.jsonl"
    src.write_text("".join(json.dumps({"id": i, "question": q}) + "\n"
                           for i, q in zip(IDS, QUESTIONS, strict=True)), encoding="utf-8")
    return src


def answers(out: Path) -> dict[str, str]:
    rows = read_rows(out)
    assert all("answer" in r for r in rows), rows
    return {r["id"]: r["answer"] for r in rows}


@pytest.fixture(scope="module")
def exact(tmp_path_factory) -> dict[str, str]:
    """The answers of `ragraph run --exact` at concurrency 8."""
    need_module("llama_cpp")
    return run_exact(tmp_path_factory.mktemp("exact"), "c8", "-c", "8")


def test_run_exact_answers_the_same_at_concurrency_1(exact, tmp_path):
    assert run_exact(tmp_path, "c1", "-c", "1") == exact


def test_serve_exact_answers_concurrent_clients_as_run_does(exact):
    with serve(HYDE, "--exact", "-c", "8", startup_s=600) as (url, _, log):
        assert "serial-exact" in log.read_text()

        def ask(question: str) -> str:
            reply = httpx.post(url + "/runs/wait", timeout=600, json={
                "workflow": "hyde", "input": {"question": question}})
            assert reply.status_code == 200, reply.text
            return reply.json()["answer"]

        with ThreadPoolExecutor(max_workers=len(QUESTIONS)) as pool:
            got = list(pool.map(ask, QUESTIONS))
    assert dict(zip(IDS, got, strict=True)) == exact


def test_a_killed_exact_run_resumes_to_the_uninterrupted_answers(exact, tmp_path):
    out = tmp_path / "out.jsonl"
    argv = ragraph("run", HYDE, "-i", str(questions(tmp_path)), "-o", str(out), "--exact",
                   "-c", "4")
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        wait_for_lines(out, 2, proc, timeout_s=600)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        stop(proc)
    assert 2 <= len(finished_rows(out)) < len(QUESTIONS), "the kill did not land mid-run"
    subprocess.run([*argv, "--resume"], check=True, cwd=REPO, capture_output=True, timeout=900)
    assert [r["id"] for r in read_rows(out)] == IDS
    assert answers(out) == exact
