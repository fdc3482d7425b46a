"""The OpenAI-compatible endpoints through the official `openai` client, unchanged, and curl:
answers equal `ragraph run`'s, streamed deltas add up to the answer, usage counts every
generation the workflow ran."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from tests.serve.conftest import NAMES, question, reference

openai = pytest.importorskip("openai")


def client(server) -> openai.OpenAI:  # noqa: ANN001
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)


def test_models_lists_the_workflows(server):
    assert sorted(m.id for m in client(server).models.list()) == sorted(NAMES)


@pytest.mark.parametrize("workflow", NAMES)
def test_chat_answer_equals_ragraph_run(server, workflow):
    asks = [(workflow, question(i)) for i in range(3)]
    want = reference(asks)
    for w, q in asks:
        reply = client(server).chat.completions.create(
            model=w, messages=[{"role": "system", "content": "ignored"},
                               {"role": "user", "content": q}])
        assert reply.choices[0].message.content == want[(w, q)].answer
        assert reply.model == w and reply.object == "chat.completion"
        assert reply.system_fingerprint == "ragraph-sim-SIMULATED"  # always said
        assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (
            want[(w, q)].prompt_tokens, want[(w, q)].completion_tokens)
        assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens


@pytest.mark.parametrize("workflow", ["hyde", "irg"])
def test_streamed_chat_deltas_add_up_to_the_answer(server, workflow):
    q = question(7)
    want = reference([(workflow, q)])[(workflow, q)].answer
    stream = client(server).chat.completions.create(
        model=workflow, stream=True, stream_options={"include_usage": True},
        messages=[{"role": "user", "content": q}])
    chunks = list(stream)
    deltas = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert "".join(deltas) == want
    # hyde's answer node goes straight to END: its text streams token by token; IRG's answer is
    # rewritten each round, so it comes in one piece at the end.
    assert len(deltas) > 1 if workflow == "hyde" else len(deltas) == 1
    assert chunks[-2].choices[0].finish_reason == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens >= 1
    assert not chunks[-1].choices  # the usage chunk carries no choice, as OpenAI's


def test_completions_endpoint_answers_the_prompt(server):
    q = question(3)
    want = reference([("oneshot", q)])[("oneshot", q)].answer
    reply = client(server).completions.create(model="oneshot", prompt=q)
    assert reply.choices[0].text == want
    streamed = "".join(c.choices[0].text for c in client(server).completions.create(
        model="oneshot", prompt=q, stream=True))
    assert streamed == want


def test_unknown_model_is_404_and_a_bad_body_400_through_the_client(server):
    with pytest.raises(openai.NotFoundError, match="no workflow named 'gpt-4'"):
        client(server).chat.completions.create(
            model="gpt-4", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.BadRequestError, match="role 'user'"):
        client(server).chat.completions.create(
            model="hyde", messages=[{"role": "system", "content": "x"}])


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_sse_framing_seen_by_curl(server):
    body = {"model": "hyde", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    out = subprocess.run(
        ["curl", "-sSN", "--max-time", "60", server.url + "/v1/chat/completions",
         "-H", "Content-Type: application/json", "-d", json.dumps(body)],
        capture_output=True, text=True, check=True).stdout
    events = [e for e in out.split("\n\n") if e.strip()]
    assert all(e.startswith("data: ") and "\n" not in e for e in events), out[:500]
    assert events[-1] == "data: [DONE]"
    first = json.loads(events[0][len("data: "):])
    assert first["object"] == "chat.completion.chunk"
    assert first["choices"][0]["delta"]["role"] == "assistant"
