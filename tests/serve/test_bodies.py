"""Client mistakes in a body are 4xx naming the field, never a 500 or a field silently dropped:
text that is not Unicode, JSON nested to break recursive code, numbers JSON does not have,
OpenAI fields of the wrong type or range or asking for what a workflow cannot give, a body that
is not declared JSON (415: also what blocks a cross-site form post). Sampling hints a workflow
decides for itself are accepted and named in `X-Ragraph-Ignored`. Nothing here logs an error."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.serve.conftest import question, reference
from tests.serve.servers import captured_logs

JSON = {"Content-Type": "application/json"}
USER = [{"role": "user", "content": "x"}]


def post(server, path: str, raw: bytes, headers=JSON) -> httpx.Response:  # noqa: ANN001
    return httpx.post(server.url + path, content=raw, headers=headers, timeout=30)


def chat(**fields) -> bytes:
    return json.dumps({"model": "hyde", "messages": USER, **fields}).encode()


@pytest.mark.parametrize("path, raw, param", [
    # Not Unicode: a JSON escape of half a surrogate pair.
    ("/v1/chat/completions", b'{"model": "hyde", "messages": [{"role": "user", '
     b'"content": "\\ud800"}]}', "messages[0].content"),
    ("/runs/wait", b'{"workflow": "hyde", "input": {"question": "why \\udfff"}}',
     "input.question"),
    ("/runs/wait", b'{"workflow": "hyde", "input": {"question": "q", "\\ud800": "x"}}',
     "input (a key)"),
    # Nested to break recursive code: the whole body, and inside a field.
    ("/v1/chat/completions", b"[" * 1000 + b"]" * 1000, "body"),
    ("/v1/chat/completions", b'{"model": "hyde", "messages": ' + b"[" * 100 + b"]" * 100
     + b"}", "messages" + "[0]" * 32),
    ("/runs/wait", b'{"workflow": "hyde", "input": {"question": 1' + b"0" * 5000 + b"}}",
     "body"),
    # Numbers JSON does not have (Python's json reads them).
    ("/v1/chat/completions", chat()[:-1] + b', "temperature": NaN}', "temperature"),
    ("/v1/chat/completions", chat()[:-1] + b', "top_p": Infinity}', "top_p"),
    ("/runs/wait", b'{"workflow": "hyde", "input": {"question": "q", "k": -Infinity}}',
     "input.k"),
])
def test_bodies_no_parser_should_see_are_400(server, path, raw, param):
    with captured_logs() as records:
        response = post(server, path, raw)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param
    assert not [r for r in records if r.levelname in ("ERROR", "CRITICAL")]


@pytest.mark.parametrize("fields, param, says", [
    ({"max_tokens": -5}, "max_tokens", "at least 1"),
    ({"max_tokens": 1.5}, "max_tokens", "an integer"),
    ({"max_completion_tokens": True}, "max_completion_tokens", "an integer"),
    ({"temperature": 2.5}, "temperature", "from 0 to 2"),
    ({"temperature": "hot"}, "temperature", "a number"),
    ({"top_p": False}, "top_p", "a number"),
    ({"seed": "42"}, "seed", "an integer"),
    ({"presence_penalty": -3}, "presence_penalty", "from -2 to 2"),
    ({"n": True}, "n", "an integer"),
    ({"n": 2}, "n", "one answer per request"),
    ({"stream": "yes"}, "stream", "true or false"),
    ({"stream_options": {"include_usage": "yes"}}, "stream_options.include_usage",
     "true or false"),
    ({"logprobs": True}, "logprobs", "not supported"),
    ({"top_logprobs": 3}, "top_logprobs", "not supported"),
    ({"tools": [{"type": "function"}]}, "tools", "not supported"),
    ({"tool_choice": "required"}, "tool_choice", "not supported"),
    ({"response_format": {"type": "json_object"}}, "response_format", "not supported"),
    ({"stop": ["\n"]}, "stop", "not supported"),
    ({"stop": 3}, "stop", "a string or a list"),
    ({"logit_bias": {"50256": -100}}, "logit_bias", "not supported"),
    ({"user": 7}, "user", "a string"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {
        "url": "http://x/y.png"}}]}]}, "messages[0].content[0]", "only text parts"),
    ({"messages": ["hello"]}, "messages[0]", "with a role"),
])
def test_openai_fields_are_checked_not_dropped(server, fields, param, says):
    response = post(server, "/v1/chat/completions", chat(**fields))
    error = response.json()["error"]
    assert (response.status_code, error["param"]) == (400, param), error
    assert error["message"].startswith(f"{param}: ") and says in error["message"]


@pytest.mark.parametrize("fields, param", [
    ({"prompt": ["one", "two"]}, "prompt"), ({"prompt": [1, 2, 3]}, "prompt"),
    ({"prompt": "q", "echo": True}, "echo"), ({"prompt": "q", "best_of": 3}, "best_of"),
    ({"prompt": "q", "logprobs": 5}, "logprobs"), ({"prompt": "q", "suffix": "end"}, "suffix")])
def test_completion_fields_are_checked(server, fields, param):
    response = post(server, "/v1/completions", json.dumps({"model": "hyde", **fields}).encode())
    assert (response.status_code, response.json()["error"]["param"]) == (400, param)


def test_sampling_hints_are_accepted_and_named_as_not_applied(server):
    q = question(8)
    want = reference([("hyde", q)])[("hyde", q)].answer
    body = {"model": "hyde", "messages": [{"role": "user", "content": q}], "temperature": 0.7,
            "max_tokens": 50, "n": 1, "logprobs": False, "tools": [], "user": "u-1",
            "x_vendor_extra": {"a": 1}}
    response = post(server, "/v1/chat/completions", json.dumps(body).encode())
    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["content"] == want
    assert response.headers["X-Ragraph-Ignored"] == "temperature, max_tokens, x_vendor_extra"
    plain = post(server, "/v1/chat/completions", chat())
    assert "X-Ragraph-Ignored" not in plain.headers


@pytest.mark.parametrize("headers", [
    {"Content-Type": "text/plain"},  # what a cross-site form or fetch may send unasked
    {"Content-Type": "application/x-www-form-urlencoded"},  # curl -d without -H
    {},  # a body of no declared type (fetch of a Blob)
])
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/runs/wait"])
def test_a_body_not_declared_json_is_415(server, path, headers):
    raw = chat() if path.startswith("/v1") else json.dumps(
        {"workflow": "hyde", "input": {"question": "q"}}).encode()
    response = post(server, path, raw, headers=headers)
    assert response.status_code == 415
    assert "Content-Type: application/json" in response.json()["error"]["message"]
    charset = post(server, path, raw, headers={"Content-Type": "application/json; charset=utf-8"})
    assert charset.status_code == 200


@pytest.mark.parametrize("search, param", [
    (3, "search"), ({"k": 0}, "search.k"), ({"k": True}, "search.k"),
    ({"mode": "bm25"}, "search.mode"), ({"filter": []}, "search.filter"),
    ({"filter": {"title": [1]}}, "search.filter.title"), ({"top": 2}, "search.top")])
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/runs/wait"])
def test_search_options_are_checked(server, path, search, param):
    body = ({"model": "hyde", "messages": USER} if path.startswith("/v1")
            else {"workflow": "hyde", "input": {"question": "x"}})
    response = post(server, path, json.dumps({**body, "search": search}).encode())
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error.get("param") if isinstance(error, dict) else None) in (param, None)
    assert param in response.text


def test_a_request_asks_its_own_k(server):
    body = {"model": "hyde", "messages": [{"role": "user", "content": question(3)}]}
    plain = post(server, "/v1/chat/completions", json.dumps(body).encode()).json()
    one = post(server, "/v1/chat/completions",
               json.dumps({**body, "search": {"k": 1}}).encode())
    assert one.status_code == 200 and "X-Ragraph-Ignored" not in one.headers
    passages = one.json()["ragraph"]["passages"]
    assert len(passages) == 1 and len(plain["ragraph"]["passages"]) == 5  # hyde.rag: topk 5
    assert passages[0] == plain["ragraph"]["passages"][0]
