"""rewire: dependency rewiring from a def-use analysis (HedraRAG's graph transformation).

In every straight-line region (a run of control nodes joined by single NEXT edges with no other
way in: no branch, merge or loop edge inside) the pass computes each node's hazards with the
earlier nodes of the region: read-after-write, write-after-read and write-after-write on request
variables and sub-stage slots. Where some node need not wait for its control predecessor (the
query embedding only needs its text; a generation that does not read the documents need not wait
for the retrieval), the region is bracketed by a Fork and a Join and DATA edges carry the
transitively reduced dependencies: fork -> nodes with none, dep -> node, sinks -> join. Regions
never span a conditional or loop edge, and their last node's out-edges (with their conditions)
move to the Join, so they are evaluated once the whole region has run.

The pass recomputes from scratch (it first removes the forks, joins and DATA edges it made) and
leaves the graph alone when that gives what is already there, so applying it again changes nothing.

In the shipped workflows it acts on step-back prompting: the question's retrieval runs while the
step-back question is generated (docs/benchmarks/ablation.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ragraph.ir.edges import Edge, EdgeKind
from ragraph.ir.graph import RAGraph
from ragraph.ir.listing import node_order
from ragraph.ir.nodes import END, START, Node
from ragraph.ir.overlap import Fork, Join
from ragraph.passes.analysis import steps, straight_next
from ragraph.passes.base import Pass, PassContext
from ragraph.passes.rewrite import (
    fresh_id,
    insert_after,
    insert_before,
    undo_insert_after,
    undo_insert_before,
)

_MARKERS = frozenset({"fork", "join"})


@dataclass(frozen=True)
class Rewire(Pass):
    name: ClassVar[str] = "rewire"
    summary: ClassVar[str] = "data-dependency edges so independent work stops waiting"

    def apply(self, graph: RAGraph, ctx: PassContext) -> bool:
        trial = graph.copy()
        self._wire(trial)
        # Compared as sets of listing lines: re-wiring may only reorder a node's non-control
        # edges (e.g. a later pass's prefetch edge), which means nothing.
        if sorted(str(trial).splitlines()) == sorted(str(graph).splitlines()):
            return False
        self._wire(graph)
        return True

    def _wire(self, graph: RAGraph) -> None:
        unwire(graph)
        for region in regions(graph):
            deps = reduced_dependencies(region)
            if any(j - 1 not in deps[j] for j in range(1, len(region))):
                self._bracket(graph, region, deps)

    def _bracket(self, graph: RAGraph, region: list[Node], deps: list[set[int]]) -> None:
        head, last = region[0], region[-1]
        fork_id = fresh_id(graph, self.name, f"{head.id}.fork")
        join_id = fresh_id(graph, self.name, f"{last.id}.join")
        insert_before(graph, head.id, Fork(id=fork_id, join=join_id, span=head.span))
        insert_after(graph, last.id, Join(id=join_id, fork=fork_id, span=last.span))
        used = set().union(*deps)
        for j, node in enumerate(region):
            for src in [region[i].id for i in sorted(deps[j])] or [fork_id]:
                graph.insert_edge(Edge(src=src, dst=node.id, kind=EdgeKind.DATA))
        for i, node in enumerate(region):
            if i not in used:
                graph.insert_edge(Edge(src=node.id, dst=join_id, kind=EdgeKind.DATA))


def unwire(graph: RAGraph) -> None:
    """Remove what rewire added: DATA edges, then each join and fork."""
    for edge in list(graph.edges(frozenset({EdgeKind.DATA}))):
        graph.remove_edge(edge)
    for join in steps(graph, "join"):
        undo_insert_after(graph, join.id)
    for fork in steps(graph, "fork"):
        undo_insert_before(graph, fork.id)


def _eligible(node: Node) -> bool:
    return node.in_control_flow and node.id not in (START, END) and node.kind not in _MARKERS


def regions(graph: RAGraph) -> list[list[Node]]:
    """Maximal straight-line runs of two or more control nodes, in listing order."""
    found: list[list[Node]] = []
    inside: set[str] = set()
    for nid in node_order(graph):
        node = graph.node(nid)
        if nid in inside or not _eligible(node) or _continues(graph, nid):
            continue
        run = [node]
        nxt = straight_next(graph, nid)
        while nxt is not None and _eligible(graph.node(nxt)):
            run.append(graph.node(nxt))
            nxt = straight_next(graph, nxt)
        inside.update(n.id for n in run)
        if len(run) > 1:
            found.append(run)
    return found


def _continues(graph: RAGraph, nid: str) -> bool:
    """Whether `nid` is inside a run that starts at an earlier node."""
    ins = graph.in_edges(nid, control_only=True)
    if len(ins) != 1:
        return False
    pred = ins[0].src
    return _eligible(graph.node(pred)) and straight_next(graph, pred) == nid


def hazard(a: Node, b: Node) -> bool:
    """Whether b (later) must wait for a: RAW, WAR or WAW on a variable or slot."""
    return bool(a.writes() & b.reads() or a.reads() & b.writes() or a.writes() & b.writes())


def reduced_dependencies(region: list[Node]) -> list[set[int]]:
    """For each node, the earlier region nodes it must wait for, transitively reduced."""
    direct = [{i for i in range(j) if hazard(region[i], region[j])} for j in range(len(region))]
    closure: list[set[int]] = []
    for ds in direct:
        closure.append(set(ds).union(*(closure[i] for i in ds)) if ds else set())
    return [{i for i in ds if not any(i in closure[k] for k in ds if k != i)} for ds in direct]
