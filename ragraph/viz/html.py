"""One self-contained HTML page: inline CSS and SVG, no scripts, no external references, so it opens
offline from a file. One panel per graph (two for --compare), the legend, and each node's fields."""

from __future__ import annotations

from html import escape

from ragraph.viz.layout import Box, layout
from ragraph.viz.scene import Scene
from ragraph.viz.style import legend_edges, legend_nodes
from ragraph.viz.svg import render_svg, shape, stroke

_CSS = """
body { font-family: system-ui, "DejaVu Sans", Helvetica, Arial, sans-serif; margin: 20px;
       color: #111827; background: #ffffff; }
h1 { font-size: 20px; margin: 0 0 4px 0; }
.inputs { color: #4b5563; font-size: 13px; margin-bottom: 14px; }
.panels { display: flex; gap: 20px; align-items: flex-start; flex-wrap: wrap; }
.panel { border: 1px solid #e5e7eb; border-radius: 8px; padding: 10px; background: #fcfcfd; }
.panel h2 { font-size: 15px; margin: 0 0 6px 0; }
.panel .stats { color: #6b7280; font-size: 12px; margin-bottom: 4px; }
svg.graph text { font-family: inherit; }
svg.graph .elabel { paint-order: stroke; stroke: #ffffff; stroke-width: 4px; }
svg.graph g.node:hover > :first-of-type { filter: brightness(0.93); stroke-width: 2.5; }
svg.graph g.edge:hover path { stroke-width: 3.5; }
.legend { margin-top: 16px; border: 1px solid #e5e7eb; border-radius: 8px; padding: 10px;
          display: inline-block; font-size: 12px; }
.legend h2 { font-size: 14px; margin: 0 0 6px 0; }
.legend .cols { display: flex; gap: 28px; }
.legend .row { display: flex; align-items: center; gap: 8px; height: 26px; }
details { margin-top: 8px; font-size: 12px; }
table.fields { border-collapse: collapse; }
table.fields td { border-top: 1px solid #e5e7eb; padding: 3px 8px; vertical-align: top; }
table.fields td.v { white-space: pre-wrap; font-family: ui-monospace, "DejaVu Sans Mono", monospace; }
"""


def render_html(scenes: list[Scene], legend: bool = True) -> str:
    first = scenes[0]
    head = (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>ragraph: {escape(first.name)}</title><style>{_CSS}</style></head><body>")
    intro = f"<h1>{escape(first.name)}</h1>"
    if first.inputs:
        intro += f'<div class="inputs">inputs: {escape(", ".join(first.inputs))}</div>'
    panels = "".join(_panel(sc, f"p{i}-") for i, sc in enumerate(scenes))
    body = f'{intro}<div class="panels">{panels}</div>'
    if legend:
        body += _legend()
    foot = '<p class="inputs">Hover a node for its fields and prompt. Drawn by ragraph show.</p>'
    return f"{head}{body}{foot}</body></html>\n"


def embeddable(scenes: list[Scene], prefix: str) -> tuple[str, str]:
    """The panels and the legend of `render_html`, and its stylesheet, for a page that embeds
    drawings (`ragraph serve`); `prefix` keeps ids unique among several on one page."""
    body = "".join(_panel(sc, f"{prefix}{i}-") for i, sc in enumerate(scenes))
    return f'<div class="panels">{body}</div>{_legend()}', _CSS


def _panel(sc: Scene, prefix: str) -> str:
    stats = f"{len(sc.nodes)} nodes, {len(sc.edges)} edges"
    return (f'<section class="panel"><h2>{escape(sc.title)}</h2><div class="stats">{stats}</div>'
            f"{render_svg(sc, layout(sc), prefix)}{_fields_table(sc)}</section>")


def _fields_table(sc: Scene) -> str:
    rows = []
    for n in sc.nodes:
        if n.role == "control":
            continue
        fields = "\n".join(f"{k} = {v}" for k, v in n.display_fields)
        rows.append(f"<tr><td>{escape(n.id)}</td><td>{escape(n.kind)}</td>"
                    f'<td class="v">{escape(fields)}</td></tr>')
    return (f"<details><summary>node fields</summary><table class=\"fields\">{''.join(rows)}"
            "</table></details>")


def _legend() -> str:
    nodes = "".join(
        f'<div class="row"><svg width="58" height="24">'
        f"{shape(st.shape, Box(29, 12, 54, 20), st)}</svg>{escape(st.legend)}</div>"
        for _, st in legend_nodes()
    )
    edges = "".join(
        f'<div class="row"><svg width="58" height="24"><line x1="2" y1="12" x2="56" y2="12" '
        f"{stroke(st)}/></svg>{escape(st.legend)}</div>"
        for _, st in legend_edges()
    )
    return (f'<section class="legend"><h2>legend</h2><div class="cols"><div>{nodes}</div>'
            f"<div>{edges}</div></div></section>")
