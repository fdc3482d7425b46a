"""Limits and safety: refusals with the right status and a message naming the field, never a lost
neighbour; the API key; the bounded queue (429 + Retry-After); the request timeout; a client
that goes away cancels its request and its generations; shutdown drains what is in flight.

Requests that must stay in flight run on a simulated GPU whose every step takes 400 ms (a
profile file, as `ragraph calibrate` writes them), so no test depends on this machine's speed."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from ragraph.serve import ServeSettings
from tests.serve.conftest import SIM, graphs, question, reference
from tests.serve.servers import serving, slow_profile, sse_events, until

CHAT = "/v1/chat/completions"
JSON = {"Content-Type": "application/json"}


def chat(workflow: str, q: str, **extra) -> dict:
    return {"model": workflow, "messages": [{"role": "user", "content": q}], **extra}


@pytest.fixture(scope="module")
def slow(tmp_path_factory):
    """A server on the slow simulated GPU: one running request, one queued, then 429."""
    profile = slow_profile(tmp_path_factory.mktemp("profile") / "slow.json")
    config = SIM.with_knobs(profile=str(profile), concurrency=1)
    settings = ServeSettings(port=0, max_queue=1, request_timeout_s=2.0, max_body_bytes=4096,
                             api_key="sesame")
    with serving(graphs(("oneshot",)), config, settings) as served:
        yield served


def auth(key: str = "sesame") -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.mark.parametrize("body, status, field", [
    (b"{not json", 400, "body"),
    (b"[1, 2]", 400, "body"),
    (json.dumps({"messages": [{"role": "user", "content": "x"}]}).encode(), 400, "model"),
    (json.dumps(chat("hal", "x")).encode(), 404, "model"),
    (json.dumps({"model": "hyde", "messages": []}).encode(), 400, "messages"),
    (json.dumps(chat("hyde", "  ")).encode(), 400, "messages[0].content"),
    (json.dumps(chat("hyde", "x", stream="yes")).encode(), 400, "stream"),
    (json.dumps(chat("hyde", "x", n=3)).encode(), 400, "n"),
])
def test_malformed_chat_is_refused_naming_the_field(server, body, status, field):
    response = httpx.post(server.url + CHAT, content=body, headers=JSON, timeout=10)
    assert response.status_code == status
    assert response.json()["error"]["message"].startswith(f"{field}:")


@pytest.mark.parametrize("body, field", [
    ({"workflow": "hyde"}, "input"),
    ({"workflow": "hyde", "input": {"question": 3}}, "input.question"),
    ({"workflow": "hyde", "input": {"question": "q", "colour": "red"}}, "input.colour"),
    ({"workflow": "hyde", "input": {"question": "q"}, "stream_mode": "debug"}, "stream_mode"),
    ({"workflow": "hyde", "input": {"question": "q"}, "checkpoint_id": "c1"}, "checkpoint_id"),
])
def test_malformed_run_is_refused_naming_the_field(server, body, field):
    response = httpx.post(server.url + "/runs/wait", json=body, timeout=10)
    assert response.status_code == 400
    assert response.json()["error"]["param"] == field


def test_bad_requests_lose_no_neighbour(server):
    q = question(21)
    want = reference([("hyde", q)])[("hyde", q)].answer
    with httpx.stream("POST", server.url + "/runs/stream", timeout=60,
                      json={"workflow": "hyde", "input": {"question": q}}) as neighbour:
        for body in (b"", b"{", json.dumps(chat("nope", "x")).encode()) * 5:
            assert httpx.post(server.url + CHAT, content=body, headers=JSON,
                              timeout=10).status_code in (400, 404)
        events = sse_events(neighbour)
    assert events[-1][0] == "end" and events[-1][1]["answer"] == want


def test_api_key_guards_data_but_not_probes(slow):
    assert httpx.get(slow.url + "/v1/models").status_code == 401
    wrong = httpx.get(slow.url + "/v1/models", headers=auth("guess"))
    assert wrong.status_code == 401 and wrong.headers["WWW-Authenticate"] == "Bearer"
    assert httpx.get(slow.url + "/v1/models", headers=auth()).status_code == 200
    assert httpx.get(slow.url + "/ok").status_code == 200
    assert httpx.get(slow.url + "/").status_code == 200  # the page; its data needs the key


def test_the_auth_scheme_is_case_insensitive(slow):
    for scheme in ("bearer", "BEARER", "Bearer"):
        response = httpx.get(slow.url + "/v1/models", headers={"Authorization": f"{scheme} sesame"})
        assert response.status_code == 200, scheme
    for given in ("Basic sesame", "sesame", "bearer", "bearer  guess"):
        response = httpx.get(slow.url + "/v1/models", headers={"Authorization": given})
        assert response.status_code == 401, given


def test_body_over_the_limit_is_413(slow):
    big = chat("oneshot", "x" * 5000)
    response = httpx.post(slow.url + CHAT, json=big, headers=auth(), timeout=10)
    assert response.status_code == 413 and "--max-body-bytes" in response.json()["error"]["message"]

    def chunks():  # no Content-Length: counted as it arrives
        yield json.dumps(big).encode()

    response = httpx.post(slow.url + CHAT, content=chunks(), headers={**auth(), **JSON},
                          timeout=10)
    assert response.status_code == 413


def test_full_queue_is_429_with_retry_after_and_disconnects_cancel(slow):
    with httpx.Client(base_url=slow.url, headers=auth(), timeout=30) as client:
        with client.stream("POST", CHAT, json=chat("oneshot", "a", stream=True)) as running, \
                client.stream("POST", CHAT, json=chat("oneshot", "b", stream=True)) as queued:
            assert running.status_code == queued.status_code == 200
            refused = client.post(CHAT, json=chat("oneshot", "c"))
            assert refused.status_code == 429
            assert int(refused.headers["Retry-After"]) >= 1
            assert "--max-queue" in refused.json()["error"]["message"]
            until(lambda: slow.llm.in_flight == 1, what="the running request's generation")
        # Both clients went away: their requests end and the engine's stream is aborted.
        until(slow.idle, what="no request or generation left")
    assert slow.llm.counters().aborted >= 1
    metrics = httpx.get(slow.url + "/metrics", headers=auth()).text
    assert 'ragraph_requests_total{status="client_gone",workflow="oneshot"} 2.0' in metrics


def test_request_timeout_is_504_and_cancels(slow):
    response = httpx.post(slow.url + "/runs/wait", headers=auth(), timeout=30,
                          json={"workflow": "oneshot", "input": {"question": "slow"}})
    assert response.status_code == 504 and "--request-timeout" in response.text
    with httpx.stream("POST", slow.url + "/runs/stream", headers=auth(), timeout=30,
                      json={"workflow": "oneshot", "input": {"question": "slow"}}) as stream:
        events = sse_events(stream)
    assert [e for e, _ in events] == ["metadata", "updates", "error"]  # the retrieval, then 504
    assert events[-1][1]["code"] == 504
    until(slow.idle, what="no request or generation left")
    metrics = httpx.get(slow.url + "/metrics", headers=auth()).text
    assert 'ragraph_requests_total{status="timeout",workflow="oneshot"} 2.0' in metrics


def test_every_executor_serves_the_same_answers():
    asks = [(w, question(i)) for i, w in enumerate(("hyde", "irg", "oneshot", "multistep"))]
    for executor in ("sequential", "stage-batched", "langgraph"):
        config = SIM.with_knobs(executor=executor, passes="-O0")
        want = reference(asks, config)
        with serving(graphs(), config) as served, ThreadPoolExecutor(4) as pool:
            replies = list(pool.map(lambda a: httpx.post(
                served.url + CHAT, json=chat(*a), timeout=60).json(), asks))
        got = [r["choices"][0]["message"]["content"] for r in replies]
        assert got == [want[a].answer for a in asks], executor


def test_shutdown_drains_requests_in_flight(tmp_path):
    config = SIM.with_knobs(profile=str(slow_profile(tmp_path / "slow.json", step_ms=100)))
    asks = [("oneshot", question(i)) for i in range(4)]
    want = reference(asks, config)
    with serving(graphs(("oneshot",)), config) as served, ThreadPoolExecutor(4) as pool:
        replies = [pool.submit(httpx.post, served.url + CHAT, json=chat(*a), timeout=60)
                   for a in asks]
        until(lambda: served.hub.in_flight == len(asks), what="all requests in flight")
        served.stop()
        answers = [r.result().json()["choices"][0]["message"]["content"] for r in replies]
    assert answers == [want[a].answer for a in asks]
