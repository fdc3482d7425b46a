"""Every stream ends with its last event: `end` or `error` on the run API, `[DONE]` (after an
error chunk when it failed) on the OpenAI routes. Fan-out workflows stream their list values;
a bug while streaming ends the stream with an `error` event (and is logged once); shutdown past
--drain-timeout ends each stream with an `error` event that says the server is shutting down."""

from __future__ import annotations

import json
import math
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from ragraph.ir.values import GeneratedText, Items, Passage, Passages
from ragraph.serve import ServeSettings
from ragraph.serve.results import value_json, values_json
from tests.serve.conftest import SIM, graphs, question, reference
from tests.serve.servers import (
    captured_logs,
    metric,
    serving,
    slow_profile,
    sse_events,
    until,
)

FAN_OUT = ("ragfusion", "subquestions")


@pytest.fixture(scope="module")
def fan_out():
    with serving(graphs((*FAN_OUT, "hyde")), SIM) as served:
        yield served


def stream_run(url: str, workflow: str, q: str, **extra) -> list[tuple[str, dict]]:
    body = {"workflow": workflow, "input": {"question": q}, **extra}
    with httpx.stream("POST", url + "/runs/stream", json=body, timeout=60) as response:
        assert response.status_code == 200
        return sse_events(response)


def data_lines(url: str, body: dict) -> list[str]:
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=60) as response:
        return [line[6:] for line in response.iter_lines() if line.startswith("data: ")]


@pytest.mark.parametrize("workflow", FAN_OUT)
def test_fan_out_streams_end_with_the_answer(fan_out, workflow):
    q = question(5)
    want = reference([(workflow, q)])[(workflow, q)]
    events = stream_run(fan_out.url, workflow, q, stream_mode=["updates", "units"])
    assert [events[0][0], events[-1][0]] == ["metadata", "end"]
    assert events[-1][1]["answer"] == want.answer
    # The map's results and list outputs come as JSON lists.
    lists = [v for name, d in events if name == "updates" for v in d["outputs"].values()
             if isinstance(v, list) and v and not isinstance(v[0], dict)]
    assert lists, "no list value was streamed"


def test_every_value_type_has_a_json_form():
    docs = Passages((Passage(3, "Paris", "text"), Passage(9, "Rome", "text")))
    values = {"text": GeneratedText("hi", 0.5), "flag": True, "n": 3, "x": 0.25,
              "nan": math.nan, "inf": -math.inf, "docs": docs,
              "per_branch": Items((Items(("a", "b")), docs, GeneratedText("c")))}
    out = values_json(values)
    assert out == {"text": "hi", "flag": True, "n": 3, "x": 0.25, "nan": "NaN",
                   "inf": "-Infinity", "docs": [{"id": 3, "title": "Paris"},
                                                {"id": 9, "title": "Rome"}],
                   "per_branch": [["a", "b"], [{"id": 3, "title": "Paris"},
                                               {"id": 9, "title": "Rome"}], "c"]}
    json.dumps(out, allow_nan=False)  # strict JSON
    with pytest.raises(TypeError, match="no JSON form"):
        value_json(object())  # type: ignore[arg-type]


def _broken(*args, **kwargs):
    raise RuntimeError("injected: a value the server cannot write")


def test_a_bug_mid_stream_ends_it_with_an_error_event(fan_out, monkeypatch):
    monkeypatch.setattr("ragraph.serve.run_routes.values_json", _broken)
    with captured_logs() as records:
        events = stream_run(fan_out.url, "hyde", question(6))
    assert [name for name, _ in events] == ["metadata", "error"]
    error = events[-1][1]
    assert error["code"] == 500 and error["type"] == "internal_error"
    assert error["run_id"] in error["message"] and "injected" not in error["message"]
    # Counted as what it was (the hub counts it on the server's thread, once stopped).
    until(lambda: metric(fan_out.url, "ragraph_requests_total", status="internal_error",
                         workflow="hyde") == 1, what="the broken stream counted")
    assert metric(fan_out.url, "ragraph_requests_total", status="client_gone",
                  workflow="hyde") == 0
    tracebacks = [r for r in records if r.exc_info and "injected" in str(r.exc_info[1])]
    assert len(tracebacks) == 1  # logged once, with its traceback


class _BrokenDeltas:
    def add(self, text: str) -> str:
        raise RuntimeError("injected: deltas")


def test_a_bug_mid_chat_stream_sends_an_error_chunk_then_done(fan_out, monkeypatch):
    monkeypatch.setattr("ragraph.serve.openai_routes.AnswerDeltas", _BrokenDeltas)
    with captured_logs():
        lines = data_lines(fan_out.url, {"model": "hyde", "stream": True, "messages": [
            {"role": "user", "content": question(7)}]})
    assert lines[-1] == "[DONE]"
    error = json.loads(lines[-2])["error"]
    assert error["code"] == 500 and error["type"] == "internal_error"
    until(fan_out.idle, what="the broken stream's request stopped")


def test_shutdown_past_the_drain_timeout_tells_every_client_why(tmp_path):
    """Requests that run for many seconds on a slow simulated GPU; a drain of 1 s cuts them."""
    config = SIM.with_knobs(profile=str(slow_profile(tmp_path / "slow.json")))
    settings = ServeSettings(port=0, drain_timeout_s=1.0)
    with serving(graphs(("oneshot",)), config, settings) as served, ThreadPoolExecutor(3) as pool:
        run = pool.submit(stream_run, served.url, "oneshot", question(1))
        chat = pool.submit(data_lines, served.url, {"model": "oneshot", "stream": True,
                                                    "messages": [{"role": "user",
                                                                  "content": question(2)}]})
        wait = pool.submit(httpx.post, served.url + "/runs/wait", timeout=60, json={
            "workflow": "oneshot", "input": {"question": question(3)}})
        until(lambda: served.hub.in_flight == 3, what="three requests in flight")
        served.stop()
        events, lines, waited = run.result(), chat.result(), wait.result()
    assert events[-1][0] == "error", events
    assert events[-1][1]["code"] == 503 and "shutting down" in events[-1][1]["message"]
    assert "--drain-timeout 1 s" in events[-1][1]["message"]
    assert lines[-1] == "[DONE]" and json.loads(lines[-2])["error"]["code"] == 503
    assert waited.status_code == 503 and "shutting down" in waited.json()["error"]["message"]
