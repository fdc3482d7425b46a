"""Graphviz DOT text for one graph or a side-by-side comparison (one cluster per graph)."""

from __future__ import annotations

from ragraph.viz.layers import back_edges
from ragraph.viz.scene import DrawEdge, DrawNode, Scene, shorten
from ragraph.viz.style import legend_edges, legend_nodes

# The abstract shapes and lines of style.py, in Graphviz attributes.
_SHAPES = {
    "ellipse": 'shape=ellipse, style="filled"',
    "roundbox": 'shape=box, style="rounded,filled"',
    "cylinder": 'shape=cylinder, style="filled"',
    "subbox": 'shape=box, style="filled", peripheries=2',
    "parallelogram": 'shape=parallelogram, style="filled", margin="0.02,0.02"',
    "hexagon": 'shape=hexagon, style="filled"',
    "box": 'shape=box, style="filled"',
}
_LINES = {
    "solid": "style=solid",
    "bold": "style=bold, penwidth=2",
    "dashed": "style=dashed, penwidth=1.5",
    "dotted": "style=dotted, penwidth=1.5",
    "dashdot": 'style="dashed,bold", penwidth=2, arrowhead=vee',
}
_HEADER = [
    '  graph [rankdir=TB, fontname="Helvetica", fontsize=12, nodesep=0.35, ranksep=0.45];',
    '  node [fontname="Helvetica", fontsize=11, margin="0.12,0.05"];',
    '  edge [fontname="Helvetica", fontsize=9, arrowsize=0.7];',
]


def render_dot(scenes: list[Scene], legend: bool = True) -> str:
    """One scene draws plainly; several draw as clusters side by side (original, optimized)."""
    name = scenes[0].name
    lines = [f"digraph {q(name)} {{", *_HEADER]
    if len(scenes) == 1:
        lines += _body(scenes[0], prefix="", indent="  ")
    else:
        for i, sc in enumerate(scenes):
            lines.append(f"  subgraph {q(f'cluster_{i}')} {{")
            lines.append(f'    label={q(sc.title)}; style="rounded"; color="#9ca3af";')
            lines += _body(sc, prefix=f"{sc.title}/", indent="    ")
            lines.append("  }")
    if legend:
        lines += _legend()
    lines.append("}")
    return "\n".join(lines) + "\n"


def _body(sc: Scene, prefix: str, indent: str) -> list[str]:
    # The back edges of the html layout (a DFS that prefers control edges) are the ones Graphviz
    # must not rank by, so loops and round-to-round prefetches draw upward in both views.
    back = back_edges(sc)
    lines = [indent + _node(n, prefix) for n in sc.nodes]
    lines += [indent + _edge(e, prefix, i in back) for i, e in enumerate(sc.edges)]
    return lines


def _node(n: DrawNode, prefix: str) -> str:
    st = n.style
    label = n.id if n.role == "control" else f"{n.id}\n{shorten(n.subtitle, 32)}"
    return (
        f"{q(prefix + n.id)} [label={q(label)}, {_SHAPES[st.shape]}, fillcolor={q(st.fill)}, "
        f"color={q(st.stroke)}, fontcolor={q(st.text)}, tooltip={q(n.tooltip)}];"
    )


def _edge(e: DrawEdge, prefix: str, back: bool) -> str:
    attrs = [_LINES[e.style.line], f"color={q(e.style.color)}", f"fontcolor={q(e.style.color)}"]
    if e.label:
        attrs.append(f"label={q(shorten(e.label, 40))}, tooltip={q(e.label)}")
    if back:
        attrs.append("constraint=false")
    return f"{q(prefix + e.src)} -> {q(prefix + e.dst)} [{', '.join(attrs)}];"


# Line patterns drawn with box-drawing glyphs: a legend in one table keeps it as small as a node.
_GLYPHS = {
    "solid": "\u2500\u2500\u2500\u25b6", "bold": "\u2501\u2501\u2501\u25b6",
    "dashed": "\u254c\u254c\u254c\u25b6", "dotted": "\u2508\u2508\u2508\u25b6",
    "dashdot": "\u2500\u00b7\u2500\u25b6",
}


def _legend() -> list[str]:
    rows = []
    for (_, nst), (_, est) in zip(legend_nodes(), legend_edges(), strict=False):
        rows.append(_legend_node_cells(nst) + _legend_edge_cells(est))
    for _, est in legend_edges()[len(legend_nodes()):]:
        rows.append('<TD COLSPAN="2"></TD>' + _legend_edge_cells(est))
    table = "".join(f"<TR>{r}</TR>" for r in rows)
    label = (f'<<TABLE BORDER="1" COLOR="#d1d5db" CELLBORDER="0" CELLSPACING="3" CELLPADDING="2">'
             f'<TR><TD COLSPAN="4"><B>legend</B></TD></TR>{table}</TABLE>>')
    return [f'  "legend" [shape=plaintext, fontsize=9, label={label}];']


def _legend_node_cells(st) -> str:
    return (f'<TD BGCOLOR="{st.fill}" BORDER="1" COLOR="{st.stroke}" WIDTH="28"></TD>'
            f'<TD ALIGN="LEFT">{_html(st.legend)}</TD>')


def _legend_edge_cells(st) -> str:
    return (f'<TD><FONT COLOR="{st.color}">{_GLYPHS[st.line]}</FONT></TD>'
            f'<TD ALIGN="LEFT">{_html(st.legend)}</TD>')


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def q(text: str) -> str:
    """A DOT double-quoted string."""
    body = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{body}"'
