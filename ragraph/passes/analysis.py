"""Small read-only analyses the passes share (chains, straight-line successors, loops, types)."""

from __future__ import annotations

import networkx as nx

from ragraph.ir.edges import EdgeKind
from ragraph.ir.graph import RAGraph
from ragraph.ir.nodes import END, START, Node, Retrieve
from ragraph.ir.stages import RetrieveCommit
from ragraph.ir.values import Passages


def origin_of(node: Node) -> str:
    """The original node a (sub-stage) node belongs to; itself for original nodes."""
    return getattr(node, "origin", node.id)


def step(graph: RAGraph, origin: str, kind: str) -> Node | None:
    """The sub-stage of `origin` of the given kind, if the chain has one."""
    for node in graph.nodes():
        if node.kind == kind and getattr(node, "origin", None) == origin:
            return node
    return None


def steps(graph: RAGraph, kind: str) -> list[Node]:
    return [n for n in graph.nodes() if n.kind == kind]


def straight_next(graph: RAGraph, nid: str) -> str | None:
    """The node that always runs right after `nid`: nid's only control edge is NEXT to it and it
    has no other way in. None at branches, merges and END."""
    outs = graph.out_edges(nid, control_only=True)
    if len(outs) != 1 or outs[0].kind != EdgeKind.NEXT or outs[0].dst in (START, END):
        return None
    dst = outs[0].dst
    return dst if len(graph.in_edges(dst, control_only=True)) == 1 else None


def next_original(graph: RAGraph, nid: str, skip: frozenset[str]) -> str | None:
    """The first node after `nid` on its straight-line path whose kind is not in `skip`."""
    cur = straight_next(graph, nid)
    while cur is not None and graph.node(cur).kind in skip:
        cur = straight_next(graph, cur)
    return cur


def on_cycle(graph: RAGraph, nid: str) -> bool:
    control = graph.control_graph()
    return any(nid in comp and (len(comp) > 1 or control.has_edge(nid, nid))
               for comp in nx.strongly_connected_components(control))


def passage_vars(graph: RAGraph) -> frozenset[str]:
    """Variables that hold retrieved passages."""
    names = {n.output for n in graph.nodes() if isinstance(n, Retrieve | RetrieveCommit)}
    names |= {i.name for i in graph.inputs.values() if isinstance(i.default, Passages)}
    return frozenset(names)
