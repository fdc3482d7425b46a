"""The one styling table every renderer reads: node look by role, edge look by kind, the legend.

Nodes are styled by their `role` (not their kind) so the node kinds a pass adds draw correctly
without code here; an unknown role falls back to a neutral box. Each renderer translates the same
abstract shape / line names into its own syntax, so the drawings agree across formats.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ragraph.ir.edges import Edge, EdgeKind


@dataclass(frozen=True)
class NodeStyle:
    shape: str  # abstract: ellipse, roundbox, cylinder, subbox, parallelogram, hexagon, box
    fill: str
    stroke: str
    text: str
    legend: str  # what the legend says this look means


@dataclass(frozen=True)
class EdgeStyle:
    line: str  # abstract: solid, bold, dashed, dotted, dashdot
    color: str
    tag: str  # short text put on the edge ("" for a plain NEXT edge)
    legend: str


NODE_STYLES: dict[str, NodeStyle] = {
    "control": NodeStyle("ellipse", "#374151", "#111827", "#ffffff", "START / END"),
    "llm": NodeStyle("roundbox", "#dbeafe", "#1d4ed8", "#0f172a", "generation (LLM)"),
    "search": NodeStyle("cylinder", "#dcfce7", "#15803d", "#0f172a", "retrieval (vector search)"),
    "substage": NodeStyle(
        "subbox", "#ede9fe", "#6d28d9", "#0f172a",
        "sub-stage (double border, filled like the stage it splits)",
    ),
    "prefetch": NodeStyle(
        "parallelogram", "#ffedd5", "#c2410c", "#0f172a", "prefetch node (side work)",
    ),
    "speculative": NodeStyle("hexagon", "#fce7f3", "#be185d", "#0f172a", "speculation point"),
    "merge": NodeStyle("box", "#ccfbf1", "#0f766e", "#0f172a", "merge (one value from a list)"),
}
FALLBACK_NODE = NodeStyle("box", "#f3f4f6", "#4b5563", "#0f172a", "other node")

EDGE_STYLES: dict[EdgeKind, EdgeStyle] = {
    EdgeKind.NEXT: EdgeStyle("solid", "#374151", "", "next (control)"),
    EdgeKind.COND: EdgeStyle("solid", "#1d4ed8", "if", "conditional (control)"),
    EdgeKind.LOOP: EdgeStyle("bold", "#7c3aed", "loop", "bounded loop, at most N times"),
    EdgeKind.DATA: EdgeStyle("dotted", "#0e7490", "data", "rewired dependency (data only)"),
    EdgeKind.SPECULATIVE: EdgeStyle("dashed", "#db2777", "spec", "speculative start"),
    EdgeKind.COMMIT: EdgeStyle("bold", "#15803d", "commit", "commit (speculation verified)"),
    EdgeKind.ROLLBACK: EdgeStyle("dashdot", "#b91c1c", "rollback", "rollback (restart)"),
    EdgeKind.PREFETCH: EdgeStyle("dotted", "#c2410c", "prefetch", "prefetch (warms the index)"),
}


def node_style(role: str) -> NodeStyle:
    return NODE_STYLES.get(role, FALLBACK_NODE)


def substage_style(origin_role: str | None) -> NodeStyle:
    """A sub-stage keeps the sub-stage outline and takes the fill of the stage it was split from,
    so a split generation still reads as LLM work and a split retrieval as search work."""
    base = NODE_STYLES["substage"]
    if origin_role is None or origin_role not in NODE_STYLES or origin_role == "substage":
        return base
    return replace(base, fill=NODE_STYLES[origin_role].fill)


def edge_style(kind: EdgeKind) -> EdgeStyle:
    return EDGE_STYLES[kind]


def edge_label(edge: Edge) -> str:
    """The text drawn on an edge: its condition, loop bound and, for pass-added kinds, its kind."""
    parts: list[str] = []
    if edge.kind == EdgeKind.LOOP:
        parts.append(f"\u21bb \u2264{edge.max_iters}" if edge.max_iters else "\u21bb")
    elif not edge.kind.is_control:
        parts.append(edge_style(edge.kind).tag)
    if edge.condition is not None:
        parts.append(f"if {edge.condition.source}")
    return " ".join(parts)


def legend_nodes() -> list[tuple[str, NodeStyle]]:
    """(role, style) for the legend; sub-stages, prefetch and speculation always listed."""
    return list(NODE_STYLES.items())


def legend_edges() -> list[tuple[EdgeKind, EdgeStyle]]:
    return list(EDGE_STYLES.items())
