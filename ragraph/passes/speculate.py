"""speculate: speculative edges with explicit verify points (HedraRAG section 5, RAGCache).

- generation: a retrieval followed directly by a generation that reads its passages gets a
  SPECULATIVE edge search-steps -> prefill (start the generation on the partial top-k);
- retrieval: a generation followed directly by a retrieval whose query reads its output gets a
  SPECULATIVE edge decode -> embed-query (embed and search the partial text, warming the cache);
  so does one that goes there on a condition (multistep's follow-up question, searched unless
  it says "none") when nothing else leads to that retrieval: a warm search whose branch is not
  taken costs search time, never an answer.

Fan-out: a map's retrieval followed by a merge and a generation reading the merged passages (RAG-
Fusion's fused top-k) gets the same edge, the runtime rendering the prompt from the merge of every
branch's partial top-k; the verify point compares the prompt the final fused passages render, so it
stays exact. A mapped generation or retrieval is never speculated: the verify point checks one
rendered prompt or query, a map renders one per branch.

Either way a spec-verify node is inserted just before the speculated chain, with a COMMIT edge from
the source's last step (where the final value is known) and a ROLLBACK edge to the chain's first
step. The runtime policy (load threshold tau, semantic drift) decides whether to take an edge; a
declined edge leaves the -O0 behaviour, and an accepted one is adopted only when the inputs match.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from ragraph.ir.edges import Edge, EdgeKind
from ragraph.ir.graph import RAGraph
from ragraph.ir.nodes import Node
from ragraph.ir.overlap import SpecVerify
from ragraph.ir.template import Template
from ragraph.passes.analysis import next_original, step, steps
from ragraph.passes.base import Pass, PassContext
from ragraph.passes.rewrite import fresh_id, insert_before

# No-op control nodes other passes may put between two chains.
_TRANSPARENT = frozenset({"fork", "join"})


@dataclass(frozen=True)
class Speculate(Pass):
    name: ClassVar[str] = "speculate"
    summary: ClassVar[str] = "speculative generation/retrieval edges with verify and rollback"
    requires: ClassVar[tuple[str, ...]] = ("split-stages",)
    generation: bool = True
    retrieval: bool = True

    def apply(self, graph: RAGraph, ctx: PassContext) -> bool:
        changed = False
        if self.generation:
            for commit in steps(graph, "retrieve-commit"):
                changed |= self._guard(graph, commit, "search-steps", "prefill", "flat_prompt")
        if self.retrieval:
            for finish in steps(graph, "finish"):
                changed |= self._guard(graph, finish, "decode", "embed-query", "query")
        return changed

    def _guard(self, graph: RAGraph, last: Node, partial_kind: str, head_kind: str,
               field: str) -> bool:
        """Speculate the chain right after `last` (the source's output step) on its partial
        value, when that chain starts with `head_kind` and reads the source's output."""
        source, var = last.origin, last.output  # type: ignore[attr-defined]
        nxt = next_original(graph, last.id, _TRANSPARENT)
        if nxt is None and partial_kind == "decode":
            nxt = _branch_into(graph, last.id, head_kind)
        if nxt is not None and partial_kind == "search-steps" and _merges(graph.node(nxt), var):
            var = graph.node(nxt).output  # type: ignore[attr-defined]
            nxt = next_original(graph, nxt, _TRANSPARENT)
        if nxt is None:
            return False
        head = graph.node(nxt)
        inputs: Template | None = getattr(head, field, None)
        if head.kind != head_kind or inputs is None or var not in inputs.variables:
            return False
        if getattr(head, "each", ()):
            return False
        partial = step(graph, source, partial_kind)
        if partial is None:
            return False
        target = head.origin  # type: ignore[attr-defined]
        verify = SpecVerify(id=fresh_id(graph, self.name, f"{target}.verify"), origin=target,
                            source=source, var=var, inputs=inputs, span=head.span)
        insert_before(graph, head.id, verify)
        graph.replace_node(replace(head, guarded=True))  # type: ignore[type-var]
        graph.insert_edge(Edge(src=partial.id, dst=head.id, kind=EdgeKind.SPECULATIVE))
        graph.insert_edge(Edge(src=last.id, dst=verify.id, kind=EdgeKind.COMMIT))
        graph.insert_edge(Edge(src=verify.id, dst=head.id, kind=EdgeKind.ROLLBACK))
        return True


def _branch_into(graph: RAGraph, nid: str, kind: str) -> str | None:
    """The node of `kind` that a conditional edge of `nid` leads to, when no other edge does."""
    for edge in graph.out_edges(nid, control_only=True):
        if edge.kind == EdgeKind.COND and graph.node(edge.dst).kind == kind \
                and len(graph.in_edges(edge.dst, control_only=True)) == 1:
            return edge.dst
    return None


def _merges(node: Node, var: str) -> bool:
    """Whether `node` merges the list `var` (a map's output) into one value."""
    return node.kind == "merge" and getattr(node, "input", None) == var
