"""A run's requests as OpenTelemetry spans.

Requests run concurrently and interleave on one event loop, so no span is ever "current": the
recorder keeps what each request did (its units with their times, its generations, retrievals
and speculations) and, when the request ends, builds its tree at once with explicit parents and
the work's own start and end times: a CHAIN span for the request; under it one span per workflow
node execution (RETRIEVER, LLM, or CHAIN for a merge), a loop's rounds each their own; under a
node the compiler split, one span per sub-stage unit (the query's embedding an EMBEDDING span).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from ragraph.ir.nodes import Node
from ragraph.runtime.events import Searched
from ragraph.runtime.llm.chat import Prompt, prompt_text
from ragraph.runtime.llm.protocol import GenerationResult
from ragraph.runtime.request import RequestState
from ragraph.runtime.telemetry import conventions as c
from ragraph.runtime.telemetry.models import Models

RETRIEVAL_UNITS = frozenset({"embed-query", "probe", "cache-lookup", "search-steps",
                             "retrieve-commit", "retrieve"})
GENERATION_UNITS = frozenset({"prefill", "decode", "finish", "generate"})
# The unit that ends one execution of its workflow node (a loop's next round opens another).
CLOSING_UNITS = frozenset({"retrieve-commit", "finish", "retrieve", "generate", "merge"})
WHOLE_NODES = frozenset({"retrieve", "generate", "merge"})  # a node the compiler left whole
CONTROL_UNITS = frozenset({"start", "end", "fork", "join"})  # no work of their own


@dataclass(frozen=True)
class _Unit:
    uid: str
    kind: str
    started: float
    ended: float


@dataclass
class _NodeRun:
    """One execution of a workflow node by one request."""

    origin: str
    units: list[_Unit] = field(default_factory=list)
    generations: list[tuple[GenerationResult, Prompt | None]] = field(default_factory=list)
    searched: Searched | None = None
    launched: int = 0
    adopted: int = 0

    @property
    def family(self) -> str:
        kinds = {u.kind for u in self.units}
        if self.searched is not None or kinds & RETRIEVAL_UNITS:
            return c.RETRIEVER
        if self.generations or self.launched or kinds & GENERATION_UNITS:
            return c.LLM
        return c.CHAIN

    @property
    def split(self) -> bool:
        return not (len(self.units) == 1 and self.units[0].kind in WHOLE_NODES)


@dataclass
class _RequestRun:
    done: list[_NodeRun] = field(default_factory=list)
    open: dict[str, _NodeRun] = field(default_factory=dict)

    def node(self, origin: str) -> _NodeRun:
        return self.open.setdefault(origin, _NodeRun(origin))


class SpanRecorder:
    """The run's `RunRecorder`: keeps each request's work until it ends, then emits its spans."""

    def __init__(self, tracer: Tracer, models: Models) -> None:
        self.tracer, self.models = tracer, models
        # perf_counter seconds (the runtime's clock) to epoch nanoseconds (OpenTelemetry's).
        self._offset_ns = time.time_ns() - time.perf_counter_ns()
        self._requests: dict[str, _RequestRun] = {}
        self._lock = threading.Lock()  # the baselines' threads report too

    # -- what the run reports --------------------------------------------------------------------

    def unit(self, state: RequestState, node: Node, started: float, ended: float) -> None:
        if node.kind in CONTROL_UNITS:
            return
        origin = getattr(node, "origin", node.id)
        with self._lock:
            run = self._request(state.rid)
            current = run.node(origin)
            current.units.append(_Unit(node.id, node.kind, started, ended))
            if node.kind in CLOSING_UNITS:
                run.done.append(run.open.pop(origin))

    def generated(self, rid: str, origin: str, result: GenerationResult,
                  prompt: Prompt | None) -> None:
        with self._lock:
            self._request(rid).node(origin).generations.append((result, prompt))

    def retrieved(self, rid: str, origin: str, searched: Searched) -> None:
        with self._lock:
            self._request(rid).node(origin).searched = searched

    def speculated(self, rid: str, origin: str) -> None:
        with self._lock:
            self._request(rid).node(origin).launched += 1

    def speculation(self, rid: str, origin: str, adopted: bool) -> None:
        if adopted:
            with self._lock:
                self._request(rid).node(origin).adopted += 1

    def finished(self, state: RequestState) -> None:
        with self._lock:
            run = self._requests.pop(state.rid, _RequestRun())
        # A node still open did not finish (the request failed in it, or was cancelled).
        self._emit(state, [*run.done, *(n for n in run.open.values() if n.units)])

    def _request(self, rid: str) -> _RequestRun:
        return self._requests.setdefault(rid, _RequestRun())

    # -- building the spans ----------------------------------------------------------------------

    def _ns(self, seconds: float) -> int:
        return int(seconds * 1e9) + self._offset_ns

    def _emit(self, state: RequestState, nodes: list[_NodeRun]) -> None:
        end = state.finished_at if state.finished_at is not None else time.perf_counter()
        # An empty context: the request's span is a root whatever the loop thread's context.
        root = self.tracer.start_span(f"workflow {state.graph.name}", context=otel_context.Context(),
                                      kind=SpanKind.INTERNAL, start_time=self._ns(state.admitted_at),
                                      attributes=self._request_attributes(state, nodes))
        if state.error is not None:
            root.add_event("exception", {"exception.type": state.error_kind or "internal",
                                         "exception.message": state.error},
                           timestamp=self._ns(end))
            root.set_status(Status(StatusCode.ERROR, state.error))
        parent = trace.set_span_in_context(root)
        for node in nodes:
            self._node_span(state.name, node, parent)
        root.end(end_time=self._ns(end))

    def _request_attributes(self, state: RequestState, nodes: list[_NodeRun]) -> dict[str, Any]:
        launched = sum(n.launched for n in nodes)
        adopted = sum(n.adopted for n in nodes)
        attrs: dict[str, Any] = {
            c.SPAN_KIND: c.CHAIN, c.REQUEST_ID: state.name, c.WORKFLOW: state.graph.name,
            c.INPUT_VALUE: state.request.question, c.INPUT_MIME: "text/plain",
            c.PATH: list(state.path),
            c.SPEC_LAUNCHED: launched, c.SPEC_ADOPTED: adopted, c.SPEC_DISCARDED: launched - adopted,
        }
        if state.request.caller_id is not None:
            attrs[c.REQUEST_INTERNAL_ID] = state.rid
        if state.error is None:
            attrs.update({c.OUTPUT_VALUE: state.answer or "", c.OUTPUT_MIME: "text/plain"})
        else:
            attrs[c.ERROR_TYPE] = state.error_kind or "internal"
        return attrs

    def _node_span(self, name: str, node: _NodeRun, parent: otel_context.Context) -> None:
        family = node.family
        started = min((u.started for u in node.units), default=None)
        ended = max((u.ended for u in node.units), default=started)
        attrs: dict[str, Any] = {c.SPAN_KIND: family, c.REQUEST_ID: name, c.NODE: node.origin}
        if family == c.RETRIEVER and node.searched is not None:
            attrs.update(self._retrieval_attributes(node.searched))
        elif family == c.LLM:
            attrs.update(self._llm_attributes(node))
        verb = {c.RETRIEVER: "retrieve", c.LLM: "generate"}.get(family, node.units[0].kind)
        span = self.tracer.start_span(f"{verb} {node.origin}", context=parent,
                                      start_time=self._ns(started) if started else None,
                                      attributes=attrs)
        if node.split:
            inner = trace.set_span_in_context(span)
            for unit in node.units:
                self._unit_span(name, node, family, unit, inner)
        span.end(end_time=self._ns(ended) if ended else None)

    def _unit_span(self, name: str, node: _NodeRun, family: str, unit: _Unit,
                   parent: otel_context.Context) -> None:
        attrs: dict[str, Any] = {c.SPAN_KIND: family, c.REQUEST_ID: name, c.NODE: node.origin,
                                 c.UNIT: unit.uid, c.UNIT_KIND: unit.kind}
        if unit.kind == "embed-query":
            attrs.update(self._embedding_attributes(node.searched))
        span: Span = self.tracer.start_span(unit.uid, context=parent, attributes=attrs,
                                            start_time=self._ns(unit.started))
        span.end(end_time=self._ns(unit.ended))

    def _embedding_attributes(self, searched: Searched | None) -> dict[str, Any]:
        attrs: dict[str, Any] = {c.SPAN_KIND: c.EMBEDDING, c.OPERATION: "embeddings"}
        if self.models.embedder is not None:
            attrs.update({c.EMBEDDING_MODEL: self.models.embedder,
                          c.REQUEST_MODEL: self.models.embedder})
        if searched is not None:
            attrs[c.EMBEDDING_TEXT] = searched.query
        return attrs

    def _retrieval_attributes(self, searched: Searched) -> dict[str, Any]:
        attrs: dict[str, Any] = {
            c.OPERATION: "retrieval", c.INPUT_VALUE: searched.query, c.INPUT_MIME: "text/plain",
            c.NPROBE: searched.nprobe, c.CLUSTERS: searched.clusters, c.STEPS: searched.steps,
        }
        if searched.hot_hits is not None:
            attrs[c.HOT_HITS] = searched.hot_hits
        for i, passage in enumerate(searched.passages):
            prefix = f"{c.DOCUMENTS}.{i}.document"
            metadata = {k: v for k, v in passage.to_json(text=False).items() if k != "id"}
            attrs.update({f"{prefix}.id": str(passage.id), f"{prefix}.score": passage.score,
                          f"{prefix}.content": passage.text,
                          f"{prefix}.metadata": json.dumps(metadata, ensure_ascii=False)})
        return attrs

    def _llm_attributes(self, node: _NodeRun) -> dict[str, Any]:
        results = [r for r, _ in node.generations]
        prompts = [p for _, p in node.generations]
        prompt_tokens = sum(r.prompt_tokens for r in results)
        completion = sum(r.completion_tokens for r in results)
        cached = sum(r.cached_tokens for r in results)
        chat = any(p is not None and not isinstance(p, str) for p in prompts)
        attrs: dict[str, Any] = {
            c.OPERATION: "chat" if chat else "text_completion",
            c.LLM_MODEL: self.models.llm, c.REQUEST_MODEL: self.models.llm,
            c.LLM_PROVIDER: self.models.provider, c.PROVIDER: self.models.provider,
            c.SPEC_LAUNCHED: node.launched, c.SPEC_ADOPTED: node.adopted,
            c.SPEC_DISCARDED: node.launched - node.adopted,
        }
        if self.models.simulated:
            attrs[c.SIMULATED] = True
        if results:
            attrs.update({
                c.LLM_PROMPT_TOKENS: prompt_tokens, c.LLM_COMPLETION_TOKENS: completion,
                c.LLM_TOTAL_TOKENS: prompt_tokens + completion, c.LLM_CACHE_READ_TOKENS: cached,
                c.INPUT_TOKENS: prompt_tokens, c.OUTPUT_TOKENS: completion,
                c.CACHE_READ_TOKENS: cached,
                c.FINISH_REASONS: [r.finish_reason for r in results],
            })
        if len(node.generations) == 1:  # a map's branches are items of a list, not one text
            result, prompt = node.generations[0]
            attrs.update({c.OUTPUT_VALUE: result.text, c.OUTPUT_MIME: "text/plain"})
            if prompt is not None:
                attrs.update({c.INPUT_VALUE: prompt_text(prompt), c.INPUT_MIME: "text/plain"})
        return attrs

