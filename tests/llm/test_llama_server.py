"""llama.cpp's C++ `llama-server` where its dialect differs from llama_cpp.server's, and what it
promises about answers.

- Logprobs: it answers `/v1/completions` with the chat API's `logprobs.content` list of
  {id, token, logprob}, not the legacy `token_logprobs`; ragraph's engine and the LangGraph
  app's `openai` client both read it (else FLARE saw no confidence at all).
- Exactness: with one slot (`-np 1`) it computes one sequence at a time, so greedy answers are
  the same at any client concurrency (the test below); with several slots it batches requests
  together, and like the embedded batched engine it does not promise that (a near-tie late in
  an answer can flip with what it was batched with).

The conformance suite (test_conformance.py) runs against it too.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest

from ragraph.ir import Sampling
from ragraph.runtime.executors.app_clients import OpenAIApp, _token_logprobs
from ragraph.runtime.llm import GenerationRequest, create_engine
from ragraph.runtime.llm.http.openai import OpenAIHttpConfig
from tests.llm.conftest import SERVER_N_CTX, running_cpp_server
from tests.processes import ragraph

REPO = Path(__file__).resolve().parents[2]
PROMPT = "The capital of France is"
# What llama-server sends for one token of a completion asked for logprobs (build b1-0c1e570).
CONTENT = {"content": [{"id": 506, "token": " the", "bytes": [32, 116, 104, 101],
                        "logprob": -1.588, "top_logprobs": []}]}


def test_the_app_reads_both_logprob_shapes_from_the_openai_client() -> None:
    completion = pytest.importorskip("openai.types.completion_choice")
    ours = completion.Logprobs.model_validate(CONTENT)  # llama-server's: an extra field
    assert _token_logprobs(ours) == [pytest.approx(-1.588)]
    legacy = completion.Logprobs.model_validate({"token_logprobs": [-0.5], "tokens": [" a"]})
    assert _token_logprobs(legacy) == [-0.5]
    assert _token_logprobs(None) is None


@pytest.mark.slow
def test_the_engine_and_the_app_get_one_logprob_a_token(llama_server_cpp: str) -> None:
    pytest.importorskip("openai")
    params = Sampling(max_tokens=5, logprobs=True)

    async def main():
        config = OpenAIHttpConfig(base_url=llama_server_cpp, context_length=SERVER_N_CTX)
        async with create_engine("openai", config) as engine:
            return await engine.submit(GenerationRequest("lp", PROMPT, params=params)).result()

    result = asyncio.run(main())
    assert len(result.logprobs) == result.completion_tokens == 5
    assert all(lp <= 0 for lp in result.logprobs)
    app = OpenAIApp(llama_server_cpp, "default")
    try:
        answer = app.complete(PROMPT, params)
    finally:
        app.close()
    assert str(answer) == result.text
    # The app keeps the least likely token's probability (FLARE's confidence), from the same
    # logprobs the engine streamed.
    assert answer.min_prob == pytest.approx(2.718281828 ** min(result.logprobs), rel=1e-6)


QUESTIONS = ("Who designed the Eiffel Tower?", "What is the capital of Australia?",
             "Who painted the Mona Lisa?", "Who wrote Pride and Prejudice?",
             "Who discovered penicillin?", "What language is spoken in Brazil?",
             "What is the chemical symbol for gold?", "Who invented the telephone?")


def run_answers(tmp: Path, url: str, name: str, concurrency: int) -> dict[str, str]:
    src, out = tmp / "in.jsonl", tmp / f"{name}.jsonl"
    src.write_text("".join(json.dumps({"id": f"q{i}", "question": q}) + "\n"
                           for i, q in enumerate(QUESTIONS)), encoding="utf-8")
    subprocess.run(ragraph("run", str(REPO / "workflows" / "hyde.rag"), "-i", str(src), "-o",
                           str(out), "--engine", "openai", "--url", url, "-c", str(concurrency)),
                   check=True, cwd=REPO, capture_output=True, timeout=900)
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert all("answer" in r for r in rows), rows
    return {r["id"]: r["answer"] for r in rows}


@pytest.mark.slow
def test_one_slot_gives_the_same_answers_at_any_concurrency(model_path: str, tmp_path) -> None:
    """`ragraph run --engine openai` on a one-slot llama-server: -c 1 and -c 8 answer alike
    (HyDE, two generations a question, the default index)."""
    with running_cpp_server(model_path, tmp_path / "server.log", slots=1) as (_, url):
        alone = run_answers(tmp_path, url, "c1", 1)
        together = run_answers(tmp_path, url, "c8", 8)
    assert together == alone
