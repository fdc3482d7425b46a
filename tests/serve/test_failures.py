"""A failed request answers with the status of whose fault it was, on every endpoint and in a
stream's last event: the client's input 400 naming the field, an upstream engine's fault 502,
the workflow's or a bug 500 (a bug's details in the log, not the answer). The metrics count each
by what it was. A scheduler run that dies is restarted and the server keeps answering."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.serve.conftest import SIM, graphs, question, reference
from tests.serve.executors import DiesOnFirstRequest, Scripted, executors
from tests.serve.servers import captured_logs, metric, serving, sse_events

BUG = "internal error: TypeError: 'NoneType' is not iterable at /opt/site-packages/x.py:3"


@pytest.fixture(scope="module")
def scripted():
    with executors(Scripted()), serving(graphs(("oneshot",)), SIM) as served:
        yield served


def ask(served, endpoint: str, q: str) -> httpx.Response:  # noqa: ANN001
    body = {"/runs/wait": {"workflow": "oneshot", "input": {"question": q}},
            "/v1/chat/completions": {"model": "oneshot", "messages": [
                {"role": "user", "content": q}]},
            "/v1/completions": {"model": "oneshot", "prompt": q}}[endpoint]
    return httpx.post(served.url + endpoint, json=body, timeout=30)


QUESTION_FIELD = {"/runs/wait": "input.question", "/v1/chat/completions": "messages[0].content",
                  "/v1/completions": "prompt"}


@pytest.mark.parametrize("endpoint", list(QUESTION_FIELD))
@pytest.mark.parametrize("q, status, kind, says", [
    ("input: the prompt built from this question has 9000 tokens, more than the model's "
     "context of 2048", 400, "invalid_request_error", "has 9000 tokens"),
    ("engine: openai: HTTP 500 from http://up:8080", 502, "upstream_error",
     "upstream engine failed: openai: HTTP 500"),
    ("workflow: loop 'retrieve' ran past its bound", 500, "workflow_error", "past its bound"),
    (f"internal: {BUG}", 500, "internal_error", "the server log has the details"),
])
def test_status_says_whose_fault(scripted, endpoint, q, status, kind, says):
    with captured_logs() as records:
        response = ask(scripted, endpoint, q)
    error = response.json()["error"]
    assert (response.status_code, error["code"], error["type"]) == (status, status, kind)
    assert says in error["message"]
    if status == 400:  # the field the client gets to fix
        assert error["param"] == QUESTION_FIELD[endpoint]
        assert error["message"].startswith(QUESTION_FIELD[endpoint] + ": ")
    if kind == "internal_error":  # a bug's details stay in the log
        assert "site-packages" not in error["message"]
        assert sum(BUG in r.getMessage() for r in records) == 1


def test_an_input_error_names_the_workflow_input(scripted):
    response = ask(scripted, "/runs/wait", "input: inputs.top_k: must be a number, got 'x'")
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "input.top_k"


def test_stream_error_events_carry_the_same_status(scripted):
    q = "engine: openai: the stream ended early"
    with httpx.stream("POST", scripted.url + "/runs/stream", timeout=30, json={
            "workflow": "oneshot", "input": {"question": q}}) as response:
        events = sse_events(response)
    assert [name for name, _ in events] == ["metadata", "error"]
    assert (events[-1][1]["code"], events[-1][1]["type"]) == (502, "upstream_error")
    with httpx.stream("POST", scripted.url + "/v1/chat/completions", timeout=30, json={
            "model": "oneshot", "stream": True,
            "messages": [{"role": "user", "content": "input: too long"}]}) as response:
        lines = [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    error = json.loads(lines[-2])["error"]
    assert (error["code"], error["param"]) == (400, "messages[0].content")


def test_metrics_name_what_happened(scripted):
    for q in ("input: x", "engine: x", "internal: x"):
        ask(scripted, "/runs/wait", q)
    counts = {status: metric(scripted.url, "ragraph_requests_total", status=status,
                             workflow="oneshot")
              for status in ("client_error", "upstream_error", "internal_error")}
    assert all(n >= 1 for n in counts.values()), counts
    # A request that ran and failed is not a refusal: nothing counted as rejected with 5xx.
    for code in ("500", "502"):
        assert metric(scripted.url, "ragraph_rejected_requests_total", code=code) == 0
        assert metric(scripted.url, "ragraph_http_responses_total", code=code) >= 1


def test_a_dead_scheduler_run_is_restarted():
    q = question(4)
    want = reference([("oneshot", q)])[("oneshot", q)].answer
    with executors(DiesOnFirstRequest()) as made, captured_logs() as records, \
            serving(graphs(("oneshot",)), SIM) as served:
        first = httpx.post(served.url + "/runs/wait", timeout=30, json={
            "workflow": "oneshot", "input": {"question": q}})
        # The request the dead run held failed, as a bug; the next one is answered.
        assert first.status_code == 500 and first.json()["error"]["type"] == "internal_error"
        second = httpx.post(served.url + "/runs/wait", timeout=30, json={
            "workflow": "oneshot", "input": {"question": q}})
        assert second.status_code == 200 and second.json()["answer"] == want
        assert httpx.get(served.url + "/readiness").status_code == 200
        assert httpx.get(served.url + "/health").json()["scheduler_restarts"] == 1
        assert metric(served.url, "ragraph_scheduler_restarts_total") == 1
    assert len(made) == 2  # the dying run, then a real one
    died = [r for r in records if r.exc_info and "injected" in str(r.exc_info[1])]
    assert len(died) == 1  # the traceback, once
    assert any("restarted" in r.getMessage() for r in records)


def test_a_question_too_long_for_the_model_is_400_naming_it(server):
    # The simulated engine's context is 32,768 tokens; this question alone is more.
    long = "What about " + "the Eiffel Tower and " * 9000 + "?"
    response = httpx.post(server.url + "/runs/wait", timeout=60, json={
        "workflow": "oneshot", "input": {"question": long}})
    error = response.json()["error"]
    assert (response.status_code, error["param"]) == (400, "input.question"), error
    assert "tokens" in error["message"]


def test_readiness_says_restarting_without_the_error_itself(monkeypatch):
    from ragraph.runtime import hub

    monkeypatch.setattr(hub, "RESTART_DELAYS_S", (600.0,))  # the restart stays pending
    with executors(DiesOnFirstRequest()), captured_logs() as records, \
            serving(graphs(("oneshot",)), SIM) as served:
        first = httpx.post(served.url + "/runs/wait", timeout=30, json={
            "workflow": "oneshot", "input": {"question": question(4)}})
        assert first.status_code == 500
        ready = httpx.get(served.url + "/readiness")
        health = httpx.get(served.url + "/health")
    assert ready.status_code == 503 and health.status_code == 503
    for answer in (ready.json()["reason"], health.json()["reason"]):
        assert answer.startswith("restarting after a scheduler failure")
        assert "injected" not in answer and "RuntimeError" not in answer
    assert any(r.exc_info and "injected" in str(r.exc_info[1]) for r in records)  # logged
