"""The terminal view: a rich Tree per graph, nodes in control order with their fields, each followed
by its out-edges (conditions and loop bounds written out); two trees side by side for --compare."""

from __future__ import annotations

import io

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from ragraph.ir.edges import EdgeKind
from ragraph.viz.scene import DrawNode, Scene
from ragraph.viz.style import legend_edges, legend_nodes

# Terminal stand-ins for the shapes and line patterns of the drawings.
_MARKS = {
    "ellipse": "\u25cf", "roundbox": "\u25a2", "cylinder": "\u26c1", "subbox": "\u25a3",
    "parallelogram": "\u25b1", "hexagon": "\u2b21", "box": "\u25a1",
}
_ARROWS = {
    EdgeKind.NEXT: "\u2192", EdgeKind.COND: "\u2192", EdgeKind.LOOP: "\u2934",
    EdgeKind.DATA: "\u2508>", EdgeKind.SPECULATIVE: "\u21e2", EdgeKind.COMMIT: "\u21d2",
    EdgeKind.ROLLBACK: "\u21ba", EdgeKind.PREFETCH: "\u2508>",
}


def build_tree(sc: Scene) -> Tree:
    head = Text(sc.title, style="bold")
    if sc.inputs:
        head.append(f"  inputs: {', '.join(sc.inputs)}", style="dim")
    tree = Tree(head, guide_style="dim")
    for n in sc.nodes:
        branch = tree.add(_node_text(n))
        for name, value in n.display_fields:
            branch.add(Text(f"{name} = {value}", style="dim"))
        for e in (e for e in sc.edges if e.src == n.id):
            line = Text(f"{_ARROWS[e.kind]} {e.dst}", style=e.style.color)
            # The label already names pass-added kinds and loop bounds; plain edges say "next".
            line.append(f"  {e.label or e.kind.value}", style="italic")
            branch.add(line)
    return tree


def _node_text(n: DrawNode) -> Text:
    st = n.style
    text = Text(f"{_MARKS[st.shape]} ", style=st.stroke)
    text.append(n.id, style=f"bold {st.stroke}")
    text.append(f"  {n.kind}", style="dim" if n.role == "control" else "")
    if n.branches:
        text.append(f"  map \u00d7\u2264{n.branches} ({n.item} ...)", style="bold")
    if n.side:
        text.append("  (side)", style="dim")
    return text


def legend_table() -> Table:
    table = Table.grid(padding=(0, 2))
    table.title = "legend"
    for (_, nst), (kind, est) in zip(legend_nodes(), legend_edges(), strict=False):
        table.add_row(
            Text(f"{_MARKS[nst.shape]} {nst.legend}", style=nst.stroke),
            Text(f"{_ARROWS[kind]} {est.legend}", style=est.color),
        )
    for kind, est in legend_edges()[len(legend_nodes()):]:
        table.add_row(Text(""), Text(f"{_ARROWS[kind]} {est.legend}", style=est.color))
    return table


def tree_view(scenes: list[Scene], legend: bool = True) -> RenderableType:
    """What `ragraph show` prints: one tree, or a row of trees, then the legend."""
    if len(scenes) == 1:
        body: RenderableType = build_tree(scenes[0])
    else:
        grid = Table.grid(padding=(0, 4))
        grid.add_row(*(build_tree(sc) for sc in scenes))
        body = grid
    return Group(body, Text(""), legend_table()) if legend else body


def render_tree(scenes: list[Scene], legend: bool = True, width: int = 120) -> str:
    """The tree view as plain text (no colour codes), for files and tests."""
    buf = io.StringIO()
    Console(file=buf, width=width, color_system=None, highlight=False).print(
        tree_view(scenes, legend)
    )
    return buf.getvalue()
