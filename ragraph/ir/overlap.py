"""Node kinds that let work overlap: speculation verify points, rewired regions, prefetch.

None of them changes what a request computes; each says what MAY start early and where the early
work is checked. Runtime meaning is on each class; the edge kinds they use (see `edges.EdgeKind`):

- SPECULATIVE src -> dst: after any repetition of `src` (a search-steps or decode sub-stage) the
  runtime MAY start a speculative instance of dst's chain with src's origin output bound to its
  partial value (partial top-k as Passages, or the partial text). The instance runs dst's
  sub-stages except the chain's last one (it never assigns a visible variable) until the spec-verify
  node of dst's origin decides. A newer partial value may replace an instance (abort, start again).
- COMMIT src -> verify: src assigns the final value the verify node checks the instance against.
- ROLLBACK verify -> dst: where a rejected instance restarts: dst's chain runs normally.
- DATA a -> b (rewire): b may start once a has completed in the current traversal of the region.
- PREFETCH: see `Prefetch`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ragraph.errors import WorkflowError
from ragraph.ir.edges import EdgeKind
from ragraph.ir.nodes import Node, register_node
from ragraph.ir.stages import SubStage, slot
from ragraph.ir.template import Template


@register_node
@dataclass(frozen=True, kw_only=True)
class SpecVerify(SubStage):
    """The commit/verify point of speculation on `source`'s partial output, heading the chain of
    `origin` (the speculated generation or retrieval). When a request reaches it: if a speculative
    instance of `origin` exists, render `inputs` (origin's prompt or query) from the committed
    variables; equal to the text the instance started with: adopt it (its progress becomes the
    real chain's; slot verdict = adopt); different: abort it and follow the ROLLBACK edge (the
    chain runs from its first step; verdict = restart). No instance: verdict = none, no-op.
    Equal rendered inputs give equal outputs (greedy decoding, exact search), so answers never
    depend on whether speculation happened."""

    kind: ClassVar[str] = "spec-verify"
    role: ClassVar[str] = "speculative"
    source: str
    var: str
    inputs: Template

    def reads(self) -> frozenset[str]:
        return self.inputs.variables

    def writes(self) -> frozenset[str]:
        return frozenset({slot(self.origin, "verdict")})

    def check(self, graph: Any) -> None:
        super().check(graph)
        head = graph.out_edges(self.id, control_only=True)[0].dst
        _one_edge(graph, self, EdgeKind.ROLLBACK, graph.out_edges(self.id), head, "to")
        commits = [e for e in graph.in_edges(self.id) if e.kind == EdgeKind.COMMIT]
        if len(commits) != 1 or getattr(graph.node(commits[0].src), "origin", None) != self.source:
            raise _fail(graph, self, f"needs one commit edge from the last step of {self.source!r}")
        specs = [e for e in graph.in_edges(head) if e.kind == EdgeKind.SPECULATIVE]
        if len(specs) != 1 or getattr(graph.node(specs[0].src), "origin", None) != self.source:
            raise _fail(graph, self, f"guards {head!r}, which needs one speculative edge from "
                        f"a step of {self.source!r}")
        if not getattr(graph.node(head), "guarded", False):
            raise _fail(graph, self, f"guards {head!r}, which is not marked guarded")


def _one_edge(graph: Any, node: Node, kind: EdgeKind, edges: list, end: str, word: str) -> None:
    found = [e for e in edges if e.kind == kind]
    if len(found) != 1 or found[0].dst != end:
        raise _fail(graph, node, f"needs exactly one {kind.value} edge {word} {end!r}")


def _fail(graph: Any, node: Node, message: str) -> WorkflowError:
    from ragraph.ir.verify import fail

    return fail(graph, f"{node.kind} {node.id!r} {message}", node)


@register_node
@dataclass(frozen=True, kw_only=True)
class Fork(Node):
    """(rewire) Opens a rewired straight-line region; a no-op that completes when reached. Every
    node after it up to its Join is started by its DATA in-edges alone: once all its DATA
    predecessors completed in the current traversal (since the request last passed this Fork),
    not when its control predecessor completes. The control edges of the region still give the
    -O0 order; DATA edges cover every read-after-write, write-after-read and write-after-write
    hazard (variables and slots), so any order they allow computes the same values."""

    kind: ClassVar[str] = "fork"
    join: str

    def check(self, graph: Any) -> None:
        if self.join not in graph or graph.node(self.join).kind != "join":
            raise _fail(graph, self, f"names a join {self.join!r} that is not a join node")


@register_node
@dataclass(frozen=True, kw_only=True)
class Join(Node):
    """(rewire) Closes a rewired region: a no-op that starts when all its DATA predecessors (every
    region node without a DATA successor) completed; the request then continues on its control
    out-edges, which carry the conditions that followed the region's last node."""

    kind: ClassVar[str] = "join"
    fork: str

    def check(self, graph: Any) -> None:
        if not any(e.kind == EdgeKind.DATA for e in graph.in_edges(self.id)):
            raise _fail(graph, self, "has no data in-edge")


@register_node
@dataclass(frozen=True, kw_only=True)
class Prefetch(Node):
    """(prefetch, TeleRAG) A side node, off the control path. PREFETCH `trigger -> self`: when
    the trigger (the first step of generation `source`, whose output feeds retrieval `target`'s
    query) starts, embed the values of `known` that are set at that moment (joined by newlines;
    unset ones skipped), rank clusters by distance to it and load them onto the accelerator in
    that order within the budget (bandwidth x expected generation time). PREFETCH `self ->
    search`: those clusters serve target's search steps. `incremental` (target in a loop): later
    rounds keep what earlier rounds loaded and fetch only the missing clusters. Never changes
    results: it only decides where clusters are searched."""

    kind: ClassVar[str] = "prefetch"
    role: ClassVar[str] = "prefetch"
    in_control_flow: ClassVar[bool] = False
    source: str
    target: str
    known: tuple[str, ...]
    incremental: bool = False

    def check(self, graph: Any) -> None:
        ins = [e for e in graph.in_edges(self.id) if e.kind == EdgeKind.PREFETCH]
        outs = [e for e in graph.out_edges(self.id) if e.kind == EdgeKind.PREFETCH]
        if len(ins) != 1 or len(outs) != 1 or len(graph.in_edges(self.id)) != 1:
            raise _fail(graph, self, "needs exactly one prefetch edge in (its trigger) and one "
                        "out (the search it warms)")
        if _origin_or_id(graph, ins[0].src) != self.source:
            raise _fail(graph, self, f"must be triggered by {self.source!r}")
        if _origin_or_id(graph, outs[0].dst) != self.target:
            raise _fail(graph, self, f"must warm the search of {self.target!r}")


def _origin_or_id(graph: Any, nid: str) -> str:
    return getattr(graph.node(nid), "origin", nid)
