"""A request and its state: one instance of the compiled workflow per request."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ragraph.errors import ConfigError, FailureKind
from ragraph.ir.graph import RAGraph
from ragraph.ir.nodes import START
from ragraph.ir.values import Passages, Value
from ragraph.runtime.checks import MAX_TEXT_CHARS
from ragraph.runtime.retrieval.options import NO_OPTIONS, SearchOptions

ANSWER = "answer"


@dataclass(frozen=True)
class Request:
    """One question to answer (FlashRAG's `{id, question, golden_answers}` plus extra inputs)."""

    id: str
    question: str
    golden_answers: tuple[str, ...] = ()
    inputs: Mapping[str, Value] = field(default_factory=dict)
    workflow: str | None = None  # which workflow of a mixed run; None: the run's default
    # The caller's id where a hub gave the request one of its own (`id`, unique in the run):
    # `ragraph run --input`'s line id, `Runtime.run(id=...)`. Traces show it (`name`).
    caller_id: str | None = None
    # This request's search options (`k`, `mode`, `filter`) over its retrieve nodes' own.
    search: SearchOptions = NO_OPTIONS

    @property
    def name(self) -> str:
        """What traces call the request: the caller's id, else the runtime's."""
        return self.caller_id or self.id

    @classmethod
    def from_json(cls, raw: Any, where: str) -> Request:
        """Validate one input line; errors name the line and the field."""
        if not isinstance(raw, dict):
            raise ConfigError(where, "expected a JSON object")
        question = raw.get("question")
        if not isinstance(question, str) or not question.strip():
            raise ConfigError(f"{where}: question", "must be a non-empty string")
        check_text(question, f"{where}: question")
        rid = raw.get("id", where)
        golden = raw.get("golden_answers", raw.get("answers", ()))
        if isinstance(golden, str):
            golden = [golden]
        if not isinstance(golden, list | tuple) or not all(isinstance(g, str) for g in golden):
            raise ConfigError(f"{where}: golden_answers", "must be a list of strings")
        extra = raw.get("inputs", {})
        if not isinstance(extra, dict):
            raise ConfigError(f"{where}: inputs", "must be an object of input values")
        workflow = raw.get("workflow")
        if workflow is not None and not isinstance(workflow, str):
            raise ConfigError(f"{where}: workflow", "must be a workflow name")
        return cls(id=str(rid), question=question, golden_answers=tuple(golden), inputs=extra,
                   workflow=workflow, search=SearchOptions.from_json(raw, f"{where}: "))


def check_text(text: str, field: str) -> None:
    """Text an engine can read: JSON lets a lone UTF-16 surrogate (`"\\ud800"`) through, and
    every tokenizer and embedder downstream fails on it (it is not Unicode text). Longer than
    `MAX_TEXT_CHARS`, it is refused before any engine spends time or memory on it."""
    if len(text) > MAX_TEXT_CHARS:
        raise ConfigError(field, f"is {len(text):,} characters; at most {MAX_TEXT_CHARS:,} "
                          "are taken")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ConfigError(field, f"not valid Unicode (a lone surrogate, {text[err.start]!a}, "
                          f"at character {err.start})") from None


@dataclass
class RequestState:
    """Variables, loop counters and position of one request in its workflow graph."""

    request: Request
    graph: RAGraph
    variables: dict[str, Value]
    loop_counts: Counter[int] = field(default_factory=Counter)
    node: str = START
    path: list[str] = field(default_factory=list)
    # A split chain's rendered prompts or queries, from its first unit to its last (the
    # interpreter's, by chain origin).
    rendered: dict[str, Any] = field(default_factory=dict)
    retrievals: list[Passages] = field(default_factory=list)
    error: str | None = None
    error_kind: FailureKind | None = None  # set with `error`: whose fault it is
    admitted_at: float = 0.0  # when it reached the executor (latency counts from here)
    started_at: float | None = None  # when the executor took it to run (a slot under concurrency)
    first_token_at: float | None = None
    finished_at: float | None = None

    @property
    def rid(self) -> str:
        return self.request.id

    @property
    def name(self) -> str:
        return self.request.name

    @property
    def answer(self) -> str | None:
        value = self.variables.get(ANSWER)
        return None if value is None else str(value).strip()


def initial_variables(graph: RAGraph, request: Request) -> dict[str, Value]:
    """The workflow inputs for a request: declared defaults, then the request's values."""
    supplied: dict[str, Value] = {"question": request.question, **request.inputs}
    variables: dict[str, Value] = {}
    for inp in graph.inputs.values():
        if inp.name in supplied:
            if isinstance(supplied[inp.name], str) and inp.name != "question":
                check_text(supplied[inp.name], f"inputs.{inp.name}")  # bounded as the question
            variables[inp.name] = supplied[inp.name]
        elif inp.default is not None:
            variables[inp.name] = inp.default
        else:
            raise ConfigError(f"inputs.{inp.name}", f"workflow {graph.name!r} requires it")
    unknown = sorted(set(request.inputs) - set(graph.inputs))
    if unknown:
        raise ConfigError(f"inputs.{unknown[0]}", f"workflow {graph.name!r} has no such input")
    return variables


def new_state(graph: RAGraph, request: Request, now: float) -> RequestState:
    return RequestState(request=request, graph=graph, variables=initial_variables(graph, request),
                        admitted_at=now)


def failed_state(request: Request, graph: RAGraph, error: str, now: float,
                 kind: FailureKind = "input") -> RequestState:
    """A request that could not start (bad inputs, unknown workflow): reported, never run."""
    return RequestState(request=request, graph=graph, variables={}, admitted_at=now, error=error,
                        error_kind=kind)
