"""The fields of an OpenAI request besides `model` and the question (`messages`, `prompt`).

Each is checked for the type and range OpenAI documents (so `max_tokens: -5`, `temperature:
NaN` and `n: true` are 400 naming the field, never silently dropped), and then it is one of:

- honoured: `stream`, `stream_options.include_usage`, `user` (the caller's own id for a
  request; there is nothing to do with it but accept it), `metadata`, `store`, `service_tier`;
- a sampling hint: `temperature`, `top_p`, `max_tokens`, `max_completion_tokens`, `seed`,
  `presence_penalty`, `frequency_penalty`. A workflow's generations sample as its `.rag` file
  says, each with its own settings, and common clients send these by default, so a valid hint
  is accepted but not applied, and the response's `X-Ragraph-Ignored` header names it (as it
  names any field OpenAI does not define);
- a feature a workflow's answer does not have (several choices, log-probabilities, tools, a
  JSON format, stop strings, an echoed prompt): accepted only at its no-op value (`n: 1`,
  `logprobs: false`, `tools: []`), else 400 saying it is not supported.

A JSON `null` is the field left out, as OpenAI reads it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from ragraph.serve.http_error import HttpError

Check = Callable[[str, Any], None]
IGNORED_HEADER = "X-Ragraph-Ignored"


def _fail(name: str, what: str, value: Any) -> HttpError:
    shown = json.dumps(value, ensure_ascii=True)
    return HttpError(400, f"{name}: {what}, got {shown[:60]}", name)


def _number(lo: float, hi: float) -> Check:
    def check(name: str, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int | float) or not (
                lo <= value <= hi):  # NaN fails every comparison
            raise _fail(name, f"must be a number from {lo:g} to {hi:g}", value)
    return check


def _integer(lo: int | None = None, hi: int | None = None) -> Check:
    def check(name: str, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _fail(name, "must be an integer", value)
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            span = f"at least {lo}" if hi is None else f"from {lo} to {hi}"
            raise _fail(name, f"must be {span}", value)
    return check


def _typed(kind: type | tuple[type, ...], what: str) -> Check:
    kinds = kind if isinstance(kind, tuple) else (kind,)

    def check(name: str, value: Any) -> None:
        # JSON's true is no integer, though Python's bool is an int.
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise _fail(name, f"must be {what}", value)
    return check


def _stop(name: str, value: Any) -> None:
    if not isinstance(value, str) and not (
            isinstance(value, list) and all(isinstance(s, str) for s in value)):
        raise _fail(name, "must be a string or a list of strings", value)


def _only(check: Check, noop: Callable[[Any], bool], why: str) -> Check:
    """A feature accepted at its no-op value only."""
    def only(name: str, value: Any) -> None:
        check(name, value)
        if not noop(value):
            raise _fail(name, f"not supported: {why}", value)
    return only


_BOOL, _TEXT, _OBJECT = _typed(bool, "true or false"), _typed(str, "a string"), \
    _typed(dict, "an object")
_LIST = _typed(list, "a list")
HONOURED: dict[str, Check] = {"stream": _BOOL, "stream_options": _OBJECT, "user": _TEXT,
                              "metadata": _OBJECT, "store": _BOOL, "service_tier": _TEXT,
                              "parallel_tool_calls": _BOOL,
                              "search": _OBJECT}  # ragraph's own: k, mode, filter
HINTS: dict[str, Check] = {
    "temperature": _number(0, 2), "top_p": _number(0, 1), "max_tokens": _integer(1),
    "max_completion_tokens": _integer(1), "seed": _integer(),
    "presence_penalty": _number(-2, 2), "frequency_penalty": _number(-2, 2)}
ONE = "a workflow gives one answer per request (it must be 1)"
NO_TOOLS = "a workflow answers in text; it calls no tools"
UNSUPPORTED: dict[str, Check] = {
    "n": _only(_integer(1, 128), lambda v: v == 1, ONE),
    "best_of": _only(_integer(1, 20), lambda v: v == 1, ONE),
    "echo": _only(_BOOL, lambda v: not v, "the answer does not repeat the prompt"),
    "logprobs": _only(_typed((bool, int), "true, false or an integer"), lambda v: not v,
                      "a workflow's answer has no token log-probabilities"),
    "top_logprobs": _only(_integer(0, 20), lambda v: v == 0,
                          "a workflow's answer has no token log-probabilities"),
    "suffix": _only(_TEXT, lambda v: not v, "a workflow writes no text after a suffix"),
    "logit_bias": _only(_OBJECT, lambda v: not v, "a workflow's generations sample as its "
                        ".rag file says"),
    "stop": _only(_stop, lambda v: not v, "a workflow's generations stop as its .rag file "
                  "says"),
    "tools": _only(_LIST, lambda v: not v, NO_TOOLS),
    "functions": _only(_LIST, lambda v: not v, NO_TOOLS),
    "tool_choice": _only(_typed((str, dict), "a string or an object"),
                         lambda v: v in ("none", "auto"), NO_TOOLS),
    "function_call": _only(_typed((str, dict), "a string or an object"),
                           lambda v: v in ("none", "auto"), NO_TOOLS),
    "response_format": _only(_OBJECT, lambda v: v.get("type") == "text",
                             "a workflow's answer is text ({\"type\": \"text\"})"),
    "modalities": _only(_LIST, lambda v: v == ["text"], "a workflow's answer is text"),
    "audio": _only(lambda n, v: None, lambda v: False, "a workflow's answer is text"),
    "prediction": _only(lambda n, v: None, lambda v: False, "predicted outputs"),
}
QUESTION_FIELDS = ("model", "messages", "prompt")
# What a header may carry of a client's field names: plain ones (a name is the client's text).
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}", re.ASCII)
MAX_NAMED = 16


def check_fields(body: dict[str, Any]) -> tuple[bool, bool, tuple[str, ...]]:
    """(stream, include_usage, the fields accepted but not applied), or a 400 naming the field."""
    ignored = []
    for name, value in body.items():
        if value is None or name in QUESTION_FIELDS:
            continue
        for table in (HONOURED, HINTS, UNSUPPORTED):
            if name in table:
                table[name](name, value)
                break
        if name in HINTS or name not in (*HONOURED, *UNSUPPORTED):
            ignored.append(name)
    options = body.get("stream_options") or {}
    usage = options.get("include_usage", False)
    if usage is not None and not isinstance(usage, bool):
        raise _fail("stream_options.include_usage", "must be true or false", usage)
    return bool(body.get("stream")), bool(usage), tuple(ignored)


def ignored_header(ignored: tuple[str, ...]) -> dict[str, str]:
    """The response header naming the fields not applied (none: no header)."""
    if not ignored:
        return {}
    names = [n if _PLAIN_NAME.fullmatch(n) else "(a field with an unusual name)"
             for n in ignored[:MAX_NAMED]]
    more = [f"({len(ignored) - MAX_NAMED} more)"] if len(ignored) > MAX_NAMED else []
    return {IGNORED_HEADER: ", ".join(dict.fromkeys(names + more))}
