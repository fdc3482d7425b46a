"""The control semantics of a RAGraph, shared by every executor so they cannot disagree."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from ragraph.errors import WorkflowError
from ragraph.ir.edges import Edge, EdgeKind
from ragraph.ir.graph import RAGraph
from ragraph.ir.values import Value


def choose_edge(
    graph: RAGraph, node_id: str, state: Mapping[str, Value], loop_counts: Counter[int]
) -> Edge:
    """The control edge a request takes after `node_id` ran.

    Conditional edges are tried in declaration order; a LOOP edge only while it was taken fewer
    than `max_iters` times (counted in `loop_counts` by edge identity, updated here). Otherwise the
    NEXT edge. A condition that fails on the request's values is that request's error.
    """
    fallback: Edge | None = None
    for edge in graph.out_edges(node_id, control_only=True):
        if edge.kind == EdgeKind.NEXT:
            fallback = edge
            continue
        if edge.kind == EdgeKind.LOOP and loop_counts[id(edge)] >= (edge.max_iters or 0):
            continue
        if edge.condition is None or _holds(edge, state):
            if edge.kind == EdgeKind.LOOP:
                loop_counts[id(edge)] += 1
            return edge
    if fallback is None:
        raise WorkflowError(f"node {node_id!r} has no edge to take", node=node_id)
    return fallback


def _holds(edge: Edge, state: Mapping[str, Value]) -> bool:
    try:
        return edge.condition.holds(state)  # type: ignore[union-attr]
    except WorkflowError as err:
        raise WorkflowError(
            f"condition of {edge.src} -> {edge.dst} failed: {err.message}",
            span=edge.span, node=edge.src,
        ) from err
