"""The control semantics of a RAGraph, shared by every executor so they cannot disagree.

Lowering resolves each node's control edges once into a table (`control_table`): the edges out
of it in declaration order, each LOOP edge numbered, so a request's loop counts are keyed by
that number (stable across processes, unlike an object's id) and the walk never reads the
builder's graph at run time (as LangGraph's `compile()` attaches each edge to its node).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ragraph.errors import WorkflowError
from ragraph.ir.edges import Edge, EdgeKind
from ragraph.ir.graph import RAGraph
from ragraph.ir.values import Value


@dataclass(frozen=True)
class Successor:
    """A control edge out of a node, as a request takes it. `loop`: the key of a LOOP edge's
    count in a request's loop counts (None for the other kinds)."""

    edge: Edge
    loop: int | None = None


def control_table(graph: RAGraph) -> dict[str, tuple[Successor, ...]]:
    """Every node's control edges, in declaration order (the order conditions are tried in),
    each LOOP edge numbered across the graph."""
    table: dict[str, tuple[Successor, ...]] = {}
    loops = 0
    for node in graph.nodes():
        out = []
        for edge in graph.out_edges(node.id, control_only=True):
            if edge.kind == EdgeKind.LOOP:
                out.append(Successor(edge, loops))
                loops += 1
            else:
                out.append(Successor(edge))
        table[node.id] = tuple(out)
    return table


def choose_edge(successors: Sequence[Successor], node_id: str, state: Mapping[str, Value],
                loop_counts: Counter[int]) -> Edge:
    """The control edge a request takes after `node_id` (whose `successors` these are) ran.

    Conditional edges are tried in declaration order; a LOOP edge only while it was taken fewer
    than `max_iters` times (counted in `loop_counts` under its number, updated here). Otherwise
    the NEXT edge. A condition that fails on the request's values is that request's error.
    """
    fallback: Edge | None = None
    for successor in successors:
        edge = successor.edge
        if edge.kind == EdgeKind.NEXT:
            fallback = edge
            continue
        loop = successor.loop
        if loop is not None and loop_counts[loop] >= (edge.max_iters or 0):
            continue
        if edge.condition is None or _holds(edge, state):
            if loop is not None:
                loop_counts[loop] += 1
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
