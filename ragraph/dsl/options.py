"""Node options `(name = value, ...)`: known names, and values checked where they are written.

Generation options are the fields of `Sampling` and `chat`; retrieval options are `topk`,
`nprobe`, `mode` (`"dense"` or `"hybrid"`) and `filter` (`"FIELD=VALUE"` or a list of them, as
`ragraph run --filter` takes them); merge options `k` and `topk`. Each
value is validated on its own by the IR's own constructors, so the error points at that value and
the rules live in one place (ragraph.ir.nodes).
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any

from ragraph.dsl import ast
from ragraph.errors import WorkflowError
from ragraph.ir import Merge, Retrieve, Sampling, Template
from ragraph.ir.filters import parse_filter

GENERATE_OPTIONS = (*(f.name for f in dataclasses.fields(Sampling)), "chat")
RETRIEVE_OPTIONS = ("topk", "nprobe", "mode", "filter")
MERGE_OPTIONS = ("k", "topk")


def generate_options(options: tuple[ast.Option, ...],
                     chat_form: ast.ChatBody | None = None) -> dict[str, Any]:
    """Sampling keyword arguments, and `chat`, for `RAGraph.add_generation`; `chat_form` is the
    message form when the node is written in it (a chat turn: `chat = false` contradicts it)."""
    values = _by_name(options, GENERATE_OPTIONS, "generate")
    out: dict[str, Any] = {}
    for name, (value, opt) in values.items():
        if name == "chat":
            out["chat"] = _chat_option(value, opt, chat_form)
            continue
        if name == "stop" and isinstance(value, str):
            value = (value,)  # `stop = "\n"` reads naturally; the IR holds a tuple
        try:
            Sampling(**{name: value})
        except WorkflowError as err:
            raise WorkflowError(err.message, span=opt.value.span) from err
        out[name] = value
    return out


def _chat_option(value: Any, opt: ast.Option, chat_form: ast.ChatBody | None) -> bool:
    if not isinstance(value, bool):
        raise WorkflowError(f"chat must be true or false, got {value!r}", span=opt.value.span)
    if chat_form is not None and not value:
        raise WorkflowError("`chat = false` on a generation written as chat messages",
                            span=opt.value.span, hint=f"the `user =` on line "
                            f"{chat_form.user_keyword.line} makes it a chat turn; drop the option, "
                            "or write the prompt as a plain completion body")
    return value


def retrieve_options(options: tuple[ast.Option, ...]) -> dict[str, Any]:
    """`topk` / `nprobe` / `mode` / `filter` keyword arguments for `RAGraph.add_retrieval`."""
    values = _by_name(options, RETRIEVE_OPTIONS, "retrieve")
    # Parsed items are valid conditions; what can be wrong is the items themselves.
    where = {"filter": dict(_filter_option(*values.pop("filter")))} if "filter" in values else {}
    probe = Template.parse("")
    for name, (value, opt) in values.items():
        try:
            Retrieve(id="option-check", query=probe, output="docs", **{name: value})
        except WorkflowError as err:
            raise WorkflowError(err.message, span=opt.value.span) from err
    return {**{name: value for name, (value, _) in values.items()}, **where}


def _filter_option(value: Any, opt: ast.Option) -> tuple[tuple[str, str | int], ...]:
    """`filter = "source=guides/*.md"` or `filter = ["source=*.md", "title=Serving"]`."""
    items = (value,) if isinstance(value, str) else value
    if not items or not isinstance(items, tuple) or not all(isinstance(i, str) for i in items):
        raise WorkflowError(f"filter must be a \"FIELD=VALUE\" string or a list of them, got "
                            f"{value!r}", span=opt.value.span,
                            hint='filter = "source=guides/*.md" or filter = '
                                 '["source=*.md", "title=Serving"]')
    try:
        return parse_filter(items)
    except ValueError as err:
        raise WorkflowError(f"filter {err}", span=opt.value.span) from err


def merge_options(options: tuple[ast.Option, ...], method: str) -> dict[str, Any]:
    """`k` / `topk` keyword arguments for `RAGraph.add_merge` of a `method` merge."""
    values = _by_name(options, MERGE_OPTIONS, "merge")
    for name, (value, opt) in values.items():
        try:
            Merge(id="option-check", method=method, input="x", output="y", **{name: value})
        except WorkflowError as err:
            raise WorkflowError(err.message, span=opt.value.span) from err
    return {name: value for name, (value, _) in values.items()}


def _by_name(
    options: tuple[ast.Option, ...], known: tuple[str, ...], kind: str
) -> dict[str, tuple[Any, ast.Option]]:
    seen: dict[str, tuple[Any, ast.Option]] = {}
    for opt in options:
        name = opt.name.text
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = (f"did you mean {close[0]!r}? " if close else "") + f"{kind} options: " + (
                ", ".join(known)
            )
            raise WorkflowError(f"unknown {kind} option {name!r}", span=opt.name.span, hint=hint)
        if name in seen:
            line = seen[name][1].name.span.line
            raise WorkflowError(f"option {name!r} is given twice (first on line {line})",
                                span=opt.name.span)
        seen[name] = (opt.value.value, opt)
    return seen
