"""Graph surgery shared by the passes. Every helper keeps the declaration order of each node's
out-edges, because conditional edges are tried in that order (`ir.control.choose_edge`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from ragraph.ir.edges import Edge, EdgeKind
from ragraph.ir.graph import RAGraph
from ragraph.ir.nodes import Node
from ragraph.passes.base import PassError


def fresh_id(graph: RAGraph, pass_name: str, wanted: str) -> str:
    """`wanted`, or an error naming the clash: pass-made ids are predictable on purpose."""
    if wanted in graph:
        raise PassError(f"pass {pass_name!r} wants to add node {wanted!r}, but the workflow "
                        "already has a node with that id; rename it")
    return wanted


def rebuild_out_edges(graph: RAGraph, src: str, edit: Callable[[Edge], Edge]) -> None:
    """Replace every out-edge `e` of `src` by `edit(e)`, in the same order."""
    edges = graph.out_edges(src)
    for e in edges:
        graph.remove_edge(e)
    for e in edges:
        graph.insert_edge(edit(e))


def _sources(edges: list[Edge]) -> list[str]:
    return list(dict.fromkeys(e.src for e in edges))


def replace_with_chain(graph: RAGraph, old: str, chain: Sequence[Node]) -> None:
    """Put `chain` (joined by NEXT edges) where node `old` was: its in-edges now enter the chain's
    head, its out-edges leave the chain's tail."""
    head, tail = chain[0].id, chain[-1].id

    def move(e: Edge) -> Edge:
        return replace(e, src=tail if e.src == old else e.src, dst=head if e.dst == old else e.dst)

    saved = {p: graph.out_edges(p) for p in _sources(graph.in_edges(old)) if p != old}
    own = graph.out_edges(old)
    graph.remove_node(old)
    for node in chain:
        graph.add_node(node)
    for a, b in zip(chain, chain[1:], strict=False):
        graph.insert_edge(Edge(src=a.id, dst=b.id, kind=EdgeKind.NEXT))
    for p, edges in saved.items():
        for e in graph.out_edges(p):
            graph.remove_edge(e)
        for e in edges:
            graph.insert_edge(move(e))
    for e in own:
        graph.insert_edge(move(e))


def insert_before(graph: RAGraph, target: str, node: Node) -> None:
    """Add `node` on the control path just before `target` (other edge kinds stay on target)."""
    preds = _sources(graph.in_edges(target, control_only=True))
    graph.add_node(node)
    for p in preds:
        rebuild_out_edges(graph, p, lambda e: replace(e, dst=node.id)
                          if e.kind.is_control and e.dst == target else e)
    graph.insert_edge(Edge(src=node.id, dst=target, kind=EdgeKind.NEXT))


def insert_after(graph: RAGraph, target: str, node: Node) -> None:
    """Add `node` on the control path just after `target`: it takes over target's control
    out-edges (with their conditions and loop bounds, in order)."""
    edges = graph.out_edges(target)
    graph.add_node(node)
    for e in edges:
        graph.remove_edge(e)
    graph.insert_edge(Edge(src=target, dst=node.id, kind=EdgeKind.NEXT))
    for e in edges:
        graph.insert_edge(replace(e, src=node.id) if e.kind.is_control else e)


def undo_insert_before(graph: RAGraph, nid: str) -> None:
    """Remove a node added by `insert_before`, joining its predecessors to its successor."""
    (after,) = [e.dst for e in graph.out_edges(nid, control_only=True)]
    for p in _sources(graph.in_edges(nid, control_only=True)):
        rebuild_out_edges(graph, p, lambda e: replace(e, dst=after)
                          if e.kind.is_control and e.dst == nid else e)
    graph.remove_node(nid)


def undo_insert_after(graph: RAGraph, nid: str) -> None:
    """Remove a node added by `insert_after`, handing its control out-edges back, in order."""
    (before,) = _sources(graph.in_edges(nid, control_only=True))
    own = graph.out_edges(nid, control_only=True)
    graph.remove_node(nid)
    for e in own:
        graph.insert_edge(replace(e, src=before))
