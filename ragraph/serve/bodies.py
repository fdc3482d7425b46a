"""Request bodies parsed into what the hub needs, and every mistake an `HttpError` whose message
names the field (400) or the workflow (404). Reading the body (its type, size, time and JSON) is
`reading.py`'s; the OpenAI routes' other fields are `openai_fields.py`'s."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ragraph.errors import ConfigError
from ragraph.ir.values import Value
from ragraph.runtime.catalog import Catalog
from ragraph.runtime.request import Request as RunRequest
from ragraph.runtime.request import initial_variables
from ragraph.runtime.retrieval.options import NO_OPTIONS, SearchOptions
from ragraph.serve.http_error import HttpError
from ragraph.serve.openai_fields import check_fields
from ragraph.serve.run_fields import check_run_fields

# LangGraph's "values" (the final state) and "messages-tuple" (LangChain message chunks)
# are what langgraph-sdk and RemoteGraph ask for.
STREAM_MODES = ("updates", "units", "messages", "values", "messages-tuple")
ROLES = ("system", "developer", "user", "assistant", "tool", "function")


@dataclass(frozen=True)
class Ask:
    """One question for one workflow, as any endpoint asks it."""

    workflow: str
    question: str
    inputs: Mapping[str, Value] = field(default_factory=dict)
    stream: bool = False
    include_usage: bool = False  # OpenAI `stream_options.include_usage`
    stream_modes: tuple[str, ...] = ("updates",)  # /runs/stream: which events besides the rest
    question_field: str = "input.question"  # where the body put it (errors name it)
    ignored: tuple[str, ...] = ()  # fields accepted but not applied (openai_fields.py)
    search: SearchOptions = NO_OPTIONS  # the body's `search`: {k, mode, filter}


def parse_chat(body: dict[str, Any], catalog: Catalog) -> Ask:
    """OpenAI chat completions: `model` names the workflow; the last user message asks (the
    workflow's own prompts take the place of any system message)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise HttpError(400, "messages: must be a non-empty list of messages", "messages")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise HttpError(400, f"messages[{i}]: must be an object with a role "
                            f"({', '.join(ROLES)})", f"messages[{i}]")
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    if not users:
        raise HttpError(400, "messages: needs a message with role 'user'", "messages")
    where = f"messages[{users[-1]}].content"
    return _openai(body, catalog, _content(messages[users[-1]].get("content"), where), where)


def parse_completion(body: dict[str, Any], catalog: Catalog) -> Ask:
    """OpenAI (legacy) completions: the prompt is the question (one string, or a list of one)."""
    prompt, where = body.get("prompt"), "prompt"
    if isinstance(prompt, list) and len(prompt) == 1:
        prompt, where = prompt[0], "prompt[0]"
    elif isinstance(prompt, list):
        raise HttpError(400, "prompt: one prompt per request (a workflow gives one answer)",
                        "prompt")
    return _openai(body, catalog, _text(prompt, where), where)


def _openai(body: dict[str, Any], catalog: Catalog, question: str, where: str) -> Ask:
    name = _workflow(body, catalog, "model")
    stream, usage, ignored = check_fields(body)
    return Ask(name, question, {}, stream, usage, question_field=where, ignored=ignored,
               search=_search(body))


def parse_run(body: dict[str, Any], catalog: Catalog) -> Ask:
    """The run API: `{workflow, input: {question, ...other workflow inputs}}` (LangGraph's
    `assistant_id` is taken for `workflow`; its other fields: `run_fields.py`)."""
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
    if {"messages", "messages-tuple"} <= set(modes):
        raise HttpError(400, "stream_mode: messages or messages-tuple, not both (both send "
                        "`messages` events)", "stream_mode")
    check_run_fields(body)
    name = _workflow(body, catalog, key)
    _check_inputs(catalog, name, question, inputs)
    return Ask(name, question, inputs, stream_modes=tuple(modes), search=_search(body))


def _search(body: dict[str, Any]) -> SearchOptions:
    """The body's `search` object (`{"k": 3, "mode": "hybrid", "filter": {"source": ...}}`):
    this request's search options over the workflow's retrieve nodes'."""
    raw = body.get("search")
    if raw is None:
        return NO_OPTIONS
    if not isinstance(raw, dict):
        raise HttpError(400, "search: must be an object of k, mode and filter", "search")
    unknown = sorted(set(raw) - {"k", "mode", "filter"})
    if unknown:
        raise HttpError(400, f"search.{unknown[0]}: not a search option (k, mode, filter)",
                        f"search.{unknown[0]}")
    try:
        return SearchOptions.from_json(raw, "search.")
    except ConfigError as err:
        raise HttpError(400, str(err), err.field) from err


def _workflow(body: dict[str, Any], catalog: Catalog, key: str) -> str:
    name = body.get(key)
    if not isinstance(name, str) or not name:
        raise HttpError(400, f"{key}: must name a workflow ({_known(catalog)})", key)
    if name not in catalog.workflows:
        raise HttpError(404, f"{key}: no workflow named {name[:100]!r} ({_known(catalog)})", key)
    return name


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
    """A message's text: a string, or OpenAI's list of content parts, all text (joined)."""
    if isinstance(content, list):
        for j, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(
                    part.get("text"), str):
                raise HttpError(400, f"{where}[{j}]: only text parts are supported "
                                "({\"type\": \"text\", \"text\": ...})", f"{where}[{j}]")
        content = "".join(part["text"] for part in content)
    return _text(content, where)


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise HttpError(400, f"{where}: must be a non-empty string", where)
    return value


def _known(catalog: Catalog) -> str:
    return "this server has " + ", ".join(sorted(catalog.workflows))
