"""Request bodies: read within the size limit, parsed into what the hub needs, and every mistake
an `HttpError` whose message names the field (400), the workflow (404) or the limit (413).

Every error body is OpenAI's shape, `{"error": {"message", "type", "param", "code"}}`, which the
`openai` client turns into its typed exceptions and any other client can read."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from ragraph.errors import ConfigError
from ragraph.ir.values import Value
from ragraph.runtime.catalog import Catalog
from ragraph.runtime.request import Request as RunRequest
from ragraph.runtime.request import initial_variables

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
               413: "request_too_large", 429: "rate_limit_exceeded", 503: "unavailable",
               504: "timeout", 500: "workflow_error"}
STREAM_MODES = ("updates", "units", "messages")


class HttpError(Exception):
    def __init__(self, status: int, message: str, param: str | None = None,
                 headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param = status, message, param
        self.headers = dict(headers or {})

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": ERROR_TYPES.get(self.status, "error"),
                          "param": self.param, "code": self.status}}

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


@dataclass(frozen=True)
class Ask:
    """One question for one workflow, as any endpoint asks it."""

    workflow: str
    question: str
    inputs: Mapping[str, Value] = field(default_factory=dict)
    stream: bool = False
    include_usage: bool = False  # OpenAI `stream_options.include_usage`
    stream_modes: tuple[str, ...] = ("updates",)  # /runs/stream: which events besides the rest


async def read_json(request: Request, limit: int) -> dict[str, Any]:
    """The body as a JSON object; 413 past `limit` bytes (declared or streamed)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
    try:
        body = json.loads(b"".join(chunks))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise HttpError(400, f"body: not valid JSON: {err}") from err
    if not isinstance(body, dict):
        raise HttpError(400, "body: expected a JSON object")
    return body


def _too_large(limit: int) -> HttpError:
    return HttpError(413, f"body: larger than this server's limit of {limit} bytes "
                     "(--max-body-bytes)")


def parse_chat(body: dict[str, Any], catalog: Catalog) -> Ask:
    """OpenAI chat completions: `model` names the workflow; the last user message asks."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise HttpError(400, "messages: must be a non-empty list of messages", "messages")
    users = [i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "user"]
    if not users:
        raise HttpError(400, "messages: needs a message with role 'user'", "messages")
    question = _content(messages[users[-1]].get("content"), f"messages[{users[-1]}].content")
    return _ask(body, catalog, "model", question, {})


def parse_completion(body: dict[str, Any], catalog: Catalog) -> Ask:
    """OpenAI (legacy) completions: the prompt is the question."""
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1:
        prompt = prompt[0]
    return _ask(body, catalog, "model", _text(prompt, "prompt"), {})


def parse_run(body: dict[str, Any], catalog: Catalog) -> Ask:
    """The run API: `{workflow, input: {question, ...other workflow inputs}}` (LangGraph's
    `assistant_id` is taken for `workflow`)."""
    key = "workflow" if "workflow" in body or "assistant_id" not in body else "assistant_id"
    raw = body.get("input")
    if not isinstance(raw, dict):
        raise HttpError(400, "input: must be an object with a question", "input")
    question = _text(raw.get("question"), "input.question")
    inputs = {k: v for k, v in raw.items() if k != "question"}
    modes = body.get("stream_mode", ["updates"])
    modes = [modes] if isinstance(modes, str) else modes
    if not isinstance(modes, list) or not all(m in STREAM_MODES for m in modes):
        raise HttpError(400, f"stream_mode: must be one or more of {', '.join(STREAM_MODES)}",
                        "stream_mode")
    return _ask({**body, "stream": False}, catalog, key, question, inputs, tuple(modes))


def _ask(body: dict[str, Any], catalog: Catalog, key: str, question: str,
         inputs: dict[str, Any], modes: tuple[str, ...] = ("updates",)) -> Ask:
    name = body.get(key)
    if not isinstance(name, str) or not name:
        raise HttpError(400, f"{key}: must name a workflow ({_known(catalog)})", key)
    if name not in catalog.workflows:
        raise HttpError(404, f"{key}: no workflow named {name!r} ({_known(catalog)})", key)
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise HttpError(400, "stream: must be true or false", "stream")
    if body.get("n", 1) != 1:
        raise HttpError(400, "n: a workflow gives one answer per request (n must be 1)", "n")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise HttpError(400, "stream_options: must be an object", "stream_options")
    _check_inputs(catalog, name, question, inputs)
    return Ask(name, question, inputs, stream, bool(options.get("include_usage")), modes)


def _check_inputs(catalog: Catalog, name: str, question: str, inputs: dict[str, Any]) -> None:
    """The workflow's own check of its inputs, before the request is queued."""
    for key, value in inputs.items():
        if isinstance(value, dict | list) or value is None:
            raise HttpError(400, f"input.{key}: must be a string, number or boolean",
                            f"input.{key}")
    try:
        initial_variables(catalog.workflows[name].source,
                          RunRequest(id="check", question=question, inputs=inputs))
    except ConfigError as err:
        raise HttpError(400, str(err).replace("inputs.", "input.", 1),
                        err.field.replace("inputs.", "input.", 1)) from err


def _content(content: Any, where: str) -> str:
    """A message's text: a string, or OpenAI's list of content parts (the text parts joined)."""
    if isinstance(content, list):
        texts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        content = "".join(t for t in texts if isinstance(t, str))
    return _text(content, where)


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise HttpError(400, f"{where}: must be a non-empty string", where)
    return value


def _known(catalog: Catalog) -> str:
    return "this server has " + ", ".join(sorted(catalog.workflows))
