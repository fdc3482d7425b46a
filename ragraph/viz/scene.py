"""A renderer-neutral description of one drawing: nodes in control order with their text, edges
with their label and style. Every renderer starts from a Scene, so ordering and wording are shared.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ragraph.ir.edges import Edge, EdgeKind
from ragraph.ir.fanout import Binding
from ragraph.ir.graph import RAGraph
from ragraph.ir.listing import node_fields, node_order
from ragraph.ir.nodes import Node
from ragraph.ir.verify_fanout import list_sources
from ragraph.viz.style import (
    EdgeStyle,
    NodeStyle,
    edge_label,
    edge_style,
    node_style,
    substage_style,
)


@dataclass(frozen=True)
class DrawNode:
    id: str
    kind: str
    role: str
    side: bool  # off the control path (prefetch and other side work)
    subtitle: str  # kind, plus the variable the node writes
    fields: tuple[tuple[str, str], ...]
    style: NodeStyle
    # A map (or a step of a map's chain): at most `branches` branches, side by side in HTML,
    # each binding `item` (0: not a map).
    branches: int = 0
    item: str = ""

    @property
    def display_fields(self) -> list[tuple[str, str]]:
        """Fields for people: quoted texts (prompts) shown as written, newlines and all."""
        return [(name, _unquote(text)) for name, text in self.fields]

    @property
    def tooltip(self) -> str:
        lines = [f"{self.id}: {self.kind}"]
        lines += [f"{name} = {text}" for name, text in self.display_fields]
        return "\n".join(lines)


@dataclass(frozen=True)
class DrawEdge:
    src: str
    dst: str
    kind: EdgeKind
    label: str
    style: EdgeStyle


@dataclass(frozen=True)
class Scene:
    name: str
    title: str  # what a panel is called ("hyde", "original", "optimized (-O2)")
    inputs: tuple[str, ...]
    nodes: tuple[DrawNode, ...]
    edges: tuple[DrawEdge, ...]

    def node(self, nid: str) -> DrawNode:
        return next(n for n in self.nodes if n.id == nid)


def scene(graph: RAGraph, title: str | None = None, source: RAGraph | None = None) -> Scene:
    """`source`, the graph before the passes, lets sub-stages take their origin's colours."""
    maps = multiplicities(graph, source)
    nodes = tuple(_draw_node(graph.node(nid), _origin_role(graph.node(nid), source),
                             maps.get(getattr(graph.node(nid), "origin", nid)))
                  for nid in node_order(graph))
    # Edges grouped by source in node order, each source's edges in declaration order: the order
    # conditions are tried in, which is what a reader of the drawing needs.
    edges = tuple(_draw_edge(e) for n in nodes for e in graph.out_edges(n.id))
    inputs = tuple(
        i.name if i.default is None else f"{i.name} = {i.default!r}" for i in graph.inputs.values()
    )
    return Scene(graph.name, title or graph.name, inputs, nodes, edges)


def _origin_role(node: Node, source: RAGraph | None) -> str | None:
    # Sub-stage kinds name the node they were split from in an `origin` field.
    origin = getattr(node, "origin", None)
    if node.role != "substage" or source is None or not isinstance(origin, str):
        return None
    return source.node(origin).role if origin in source else None


def multiplicities(graph: RAGraph, source: RAGraph | None) -> dict[str, tuple[int, Binding]]:
    """Each map (by original node id): its bound on branches and its first binding. The bound is
    the item count of the list output its lists were split from (`list_sources`)."""
    sources = {**list_sources(graph), **list_sources(source or graph)}
    found: dict[str, tuple[int, Binding]] = {}
    for node in graph.nodes():
        each = getattr(node, "each", ())
        bounds = [sources[b.over].bound for b in each if b.over in sources]
        if each and bounds:
            found[getattr(node, "origin", node.id)] = (min(bounds), each[0])
    return found


def _draw_node(node: Node, origin_role: str | None,
               fan: tuple[int, Binding] | None = None) -> DrawNode:
    # Pass-private slots (`%x.kv`) are runtime scratch; the subtitle names user variables only.
    writes = sorted(w for w in node.writes() if not w.startswith("%"))
    times = f" \u00d7\u2264{fan[0]}" if fan else ""
    subtitle = node.kind + times + (f" \u2192 {', '.join(writes)}" if writes else "")
    style = substage_style(origin_role) if node.role == "substage" else node_style(node.role)
    return DrawNode(
        id=node.id, kind=node.kind, role=node.role, side=not node.in_control_flow,
        subtitle=subtitle, fields=tuple(node_fields(node)), style=style,
        branches=fan[0] if fan else 0, item=fan[1].item if fan else "",
    )


def _draw_edge(edge: Edge) -> DrawEdge:
    return DrawEdge(edge.src, edge.dst, edge.kind, edge_label(edge), edge_style(edge.kind))


def _unquote(text: str) -> str:
    # node_fields gives canonical listing text, where strings are JSON literals.
    if text.startswith('"') and text.endswith('"'):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text
    return text


def shorten(text: str, limit: int = 48) -> str:
    """Labels stay one readable line; the full text lives in tooltips and the tree view."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"
