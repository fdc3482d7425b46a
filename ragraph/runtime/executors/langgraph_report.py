"""The LangGraph app's node executions, reported as every executor reports its units.

The app's nodes run on LangGraph's worker threads; the run's hooks (the hub that answers
`ragraph run` and serve, the span recorder) belong to the event loop's thread and are not
thread-safe (the hub's queues are asyncio's). So a node hands its report to the loop
(`call_soon_threadsafe`), where reports are delivered in the order the nodes queued them. The
executor reports the request's end after `app.invoke` returned, and the pool's completion is
queued on the loop after the request's last node report: every node is reported before its
request ends.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from ragraph.ir.nodes import Node
from ragraph.ir.values import Value
from ragraph.runtime.events import RunHooks, Searched
from ragraph.runtime.request import RequestState
from ragraph.runtime.trace import Tracer


@dataclass(frozen=True)
class NodeDone:
    """One execution of a workflow node by one request, as a worker thread saw it."""

    rid: str
    node: Node
    values: dict[str, Value]  # the request's variables once the node assigned its output
    started: float
    ended: float
    searched: Searched | None = None  # what a (non-map) retrieval searched


@dataclass(frozen=True)
class NodeReports:
    """The run's hooks and Chrome trace, fed from the app's threads through the loop."""

    hooks: RunHooks
    tracer: Tracer
    loop: asyncio.AbstractEventLoop
    # The requests in the app now, by id; read and written on the loop thread only.
    states: dict[str, RequestState] = field(default_factory=dict)

    def follow(self, state: RequestState) -> None:
        """`state` enters the app (loop thread)."""
        self.states[state.rid] = state

    def forget(self, state: RequestState) -> None:
        """`state` left the app; reports still queued for it were delivered (loop thread)."""
        self.states.pop(state.rid, None)

    def node_done(self, done: NodeDone) -> None:
        """A node finished (any thread)."""
        self.loop.call_soon_threadsafe(self._deliver, done)

    def branch_done(self, rid: str, label: str, started: float, ended: float) -> None:
        """One item of a map finished (any thread): a slice of its request's Chrome track."""
        self.loop.call_soon_threadsafe(self._slice, rid, label, started, ended)

    def _slice(self, rid: str, label: str, started: float, ended: float) -> None:
        state = self.states.get(rid)
        if state is not None:
            self.tracer.add_span(state.name, label, started, ended, engine=False)

    def _deliver(self, done: NodeDone) -> None:
        state = self.states.get(done.rid)
        if state is None:
            return
        node = done.node
        self.tracer.add_span(state.name, f"{node.kind} {node.id}", done.started, done.ended,
                             engine=False)
        searched = done.searched
        if searched is not None:
            self.hooks.retrieved(state.rid, node.id, lambda: searched)
        # The observer reads the node's outputs from the request's variables, as the other
        # executors keep them; the app's final state replaces them when the request ends.
        state.variables = done.values
        self.hooks.unit_completed(state, node, done.started, done.ended)
