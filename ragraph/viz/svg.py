"""Inline SVG from a Scene and its Layout: shapes by role, lines by edge kind, hover titles with each
node's fields (prompts included) and each edge's full condition."""

from __future__ import annotations

from html import escape
from itertools import pairwise

from ragraph.viz.layout import (
    ID_FONT,
    LABEL_FONT,
    SUB_FONT,
    Box,
    EdgePath,
    Layout,
    branch_boxes,
    node_label,
)
from ragraph.viz.scene import DrawEdge, DrawNode, Scene, shorten
from ragraph.viz.style import EdgeStyle, NodeStyle, legend_edges

# The abstract lines of style.py as SVG stroke attributes: (width, dash pattern).
LINES = {
    "solid": (1.4, ""),
    "bold": (2.6, ""),
    "dashed": (1.8, "7 4"),
    "dotted": (1.8, "2 3"),
    "dashdot": (2.2, "9 3 2 3"),
}


def render_svg(sc: Scene, lay: Layout, prefix: str) -> str:
    """One <svg> element; `prefix` keeps marker ids unique when several share a page."""
    parts = [
        f'<svg class="graph" width="{lay.width:.0f}" '
        f'height="{lay.height:.0f}" viewBox="0 0 {lay.width:.0f} {lay.height:.0f}" '
        f'role="img" aria-label="{escape(sc.title)}">',
        markers(prefix),
    ]
    parts += [_edge(sc.edges[p.index], p, prefix) for p in lay.paths]
    parts += [_node(n, lay.boxes[n.id]) for n in sc.nodes]
    parts += [_edge_label(sc.edges[p.index], p) for p in lay.paths if p.label_at]
    parts.append("</svg>")
    return "\n".join(parts)


def markers(prefix: str) -> str:
    defs = [
        f'<marker id="{prefix}arrow-{kind.value}" viewBox="0 0 10 10" refX="9" refY="5" '
        f'markerUnits="userSpaceOnUse" markerWidth="10" markerHeight="10" orient="auto">'
        f'<path d="M0,0 L10,5 L0,10 z" fill="{st.color}"/></marker>'
        for kind, st in legend_edges()
    ]
    return "<defs>" + "".join(defs) + "</defs>"


def shape(kind: str, b: Box, st: NodeStyle) -> str:
    """The outline of a node: the same abstract shapes the other renderers use."""
    x0, y0, x1, y1 = b.x - b.w / 2, b.y - b.h / 2, b.x + b.w / 2, b.y + b.h / 2
    paint = f'fill="{st.fill}" stroke="{st.stroke}" stroke-width="1.5"'
    if kind == "ellipse":
        return f'<ellipse cx="{b.x:.1f}" cy="{b.y:.1f}" rx="{b.w / 2:.1f}" ry="{b.h / 2:.1f}" {paint}/>'
    if kind in ("roundbox", "box", "subbox"):
        r = 9 if kind == "roundbox" else 2
        rect = _rect(x0, y0, b.w, b.h, r, paint)
        if kind == "subbox":  # the double border of a sub-stage
            rect += _rect(x0 + 3, y0 + 3, b.w - 6, b.h - 6, 1, f'fill="none" stroke="{st.stroke}"')
        return rect
    if kind == "cylinder":
        e = 5.0
        body = (f"M{x0:.1f},{y0 + e:.1f} A{b.w / 2:.1f},{e} 0 0 0 {x1:.1f},{y0 + e:.1f} "
                f"V{y1 - e:.1f} A{b.w / 2:.1f},{e} 0 0 1 {x0:.1f},{y1 - e:.1f} Z")
        rim = f"M{x0:.1f},{y0 + e:.1f} A{b.w / 2:.1f},{e} 0 0 1 {x1:.1f},{y0 + e:.1f}"
        return f'<path d="{body}" {paint}/><path d="{rim}" fill="none" stroke="{st.stroke}"/>'
    if kind == "parallelogram":
        k = 10
        pts = [(x0 + k, y0), (x1, y0), (x1 - k, y1), (x0, y1)]
    else:  # hexagon
        k = 10
        pts = [(x0 + k, y0), (x1 - k, y0), (x1, b.y), (x1 - k, y1), (x0 + k, y1), (x0, b.y)]
    coords = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
    return f'<polygon points="{coords}" {paint}/>'


def _rect(x: float, y: float, w: float, h: float, r: float, paint: str) -> str:
    return f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" rx="{r}" {paint}/>'


def _node(n: DrawNode, b: Box) -> str:
    title, sub = node_label(n)
    st = n.style
    top = b.y - (b.h - 44) / 2 if n.branches else b.y  # a map's title sits above its branches
    texts = [_text(b.x, top + (-4 if sub else 4.5), title, ID_FONT, st.text, bold=True)]
    if sub:
        texts.append(_text(b.x, top + 12, sub, SUB_FONT, st.text))
    return (f'<g class="node role-{escape(n.role)}" data-node="{escape(n.id)}">'
            f"<title>{escape(n.tooltip)}</title>"
            f"{shape(st.shape, b, st)}{''.join(texts)}{_branches(n, b)}</g>")


def _branches(n: DrawNode, b: Box) -> str:
    """A map's branches side by side inside its node, each named by its item (`q[1]`...)."""
    parts = []
    for i, box in enumerate(branch_boxes(n, b), start=1):
        parts.append(f'<g class="branch">{shape("roundbox", box, n.style)}'
                     f"{_text(box.x, box.y + 4, f'{n.item}[{i}]', SUB_FONT, n.style.text)}</g>")
    return "".join(parts)


def _text(x: float, y: float, text: str, size: int, color: str, bold: bool = False) -> str:
    weight = ' font-weight="600"' if bold else ""
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" fill="{color}" '
            f'text-anchor="middle"{weight}>{escape(text)}</text>')


def stroke(st: EdgeStyle) -> str:
    width, dash = LINES[st.line]
    dashes = f' stroke-dasharray="{dash}"' if dash else ""
    return f'stroke="{st.color}" stroke-width="{width}"{dashes}'


def _edge(e: DrawEdge, p: EdgePath, prefix: str) -> str:
    title = f"{e.src} \u2192 {e.dst} ({e.kind.value})" + (f": {e.label}" if e.label else "")
    return (f'<g class="edge kind-{e.kind.value}"><title>{escape(title)}</title>'
            f'<path d="{path_d(p)}" fill="none" {stroke(e.style)} '
            f'marker-end="url(#{prefix}arrow-{e.kind.value})"/></g>')


def path_d(p: EdgePath) -> str:
    """Cubic segments with vertical tangents through the route's points (self loops: one curve)."""
    pts = p.points
    if p.self_loop:
        (a, b, c, d) = pts
        return f"M{a[0]:.1f},{a[1]:.1f} C{b[0]:.1f},{b[1]:.1f} {c[0]:.1f},{c[1]:.1f} {d[0]:.1f},{d[1]:.1f}"
    d = [f"M{pts[0][0]:.1f},{pts[0][1]:.1f}"]
    for (x0, y0), (x1, y1) in pairwise(pts):
        my = (y0 + y1) / 2
        d.append(f"C{x0:.1f},{my:.1f} {x1:.1f},{my:.1f} {x1:.1f},{y1:.1f}")
    return " ".join(d)


def _edge_label(e: DrawEdge, p: EdgePath) -> str:
    x, y = p.label_at  # type: ignore[misc]
    return (f'<text class="elabel" x="{x:.1f}" y="{y + 4:.1f}" font-size="{LABEL_FONT}" '
            f'fill="{e.style.color}"><title>{escape(e.label)}</title>'
            f"{escape(shorten(e.label, 40))}</text>")
