"""`ragraph serve` as a user starts it, in its own process: on the embedded default (llama.cpp,
Gemma-3-270M, the Wikipedia index) its answers equal `ragraph run`'s on the same questions, one
request at a time on both (llama.cpp's batched decoding need not be batch-invariant); on the
simulated engine it says so. SIGTERM lets the request in flight finish before the process exits."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.processes import ragraph, serve
from tests.real import need_module

pytestmark = pytest.mark.slow  # the real embedder, the default index, and on llamacpp the model

REPO = Path(__file__).resolve().parents[2]
HYDE = str(REPO / "workflows" / "hyde.rag")
ONESHOT = str(REPO / "workflows" / "oneshot.rag")
QUESTIONS = ("Who designed the Eiffel Tower?", "What is the capital of Australia?",
             "Who painted the Mona Lisa?")


def run_answers(workflow: str, tmp_path: Path) -> list[str]:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("".join(json.dumps({"id": f"q{i}", "question": q}) + "\n"
                           for i, q in enumerate(QUESTIONS)), encoding="utf-8")
    subprocess.run(ragraph("run", workflow, "--input", str(src), "--output", str(out), "-c",
                           "1"), check=True, cwd=REPO, capture_output=True)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    return [row["answer"] for row in rows]


def test_embedded_default_serves_what_run_answers_and_drains_on_sigterm(tmp_path):
    openai = pytest.importorskip("openai")
    want = run_answers(HYDE, tmp_path)
    need_module("llama_cpp")
    with serve(HYDE, ONESHOT, "-c", "1") as (url, proc, log):
        client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
        got = [client.chat.completions.create(
            model="hyde", messages=[{"role": "user", "content": q}]).choices[0].message.content
            for q in QUESTIONS[:2]]
        body = {"model": "hyde", "stream": True,
                "messages": [{"role": "user", "content": QUESTIONS[2]}]}
        with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=300) as stream:
            lines = stream.iter_lines()
            first = next(line for line in lines if line.startswith("data: "))
            proc.send_signal(signal.SIGTERM)  # the request in flight must still be answered
            rest = [line for line in lines if line.startswith("data: ")]
        # uvicorn re-raises the signal once it has shut down cleanly.
        assert proc.wait(timeout=120) in (0, -signal.SIGTERM), log.read_text()[-2000:]
        assert "Application shutdown complete" in log.read_text()
    chunks = [json.loads(line[6:]) for line in [first, *rest] if line != "data: [DONE]"]
    got.append("".join(c["choices"][0]["delta"].get("content") or "" for c in chunks))
    assert rest[-1] == "data: [DONE]"
    assert got == want


def test_simulated_engine_says_it_is_simulated():
    with serve(ONESHOT, "--engine", "sim", "-c", "4") as (url, _, log):
        assert httpx.get(url + "/health").json()["simulated"] is True
        reply = httpx.post(url + "/runs/wait", timeout=120, json={
            "workflow": "oneshot", "input": {"question": "Which game has 64 squares?"}})
        assert reply.status_code == 200 and reply.json()["answer"]
        assert "ragraph_engine_simulated 1.0" in httpx.get(url + "/metrics").text
    assert "SIMULATED" in log.read_text()
