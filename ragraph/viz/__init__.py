"""Drawing RAGraphs, offline: a terminal tree, Graphviz DOT, Mermaid, one self-contained HTML page,
and svg/png through Graphviz when it is installed.

    render(graph, "html")                              # one graph
    render(optimized, "dot", compare_with=original)    # side by side: original, then optimized

Every format shares the styling table (`style`), the node order and wording (`scene`), and the
legend, which always lists the elements the passes add (sub-stages, speculative edges, prefetch
nodes, rewired dependencies) so drawings before and after compilation read the same way.
"""

from __future__ import annotations

from ragraph.errors import RagraphError
from ragraph.ir.graph import RAGraph
from ragraph.viz.dot import render_dot
from ragraph.viz.graphviz import run_dot
from ragraph.viz.html import render_html
from ragraph.viz.mermaid import render_mermaid
from ragraph.viz.scene import Scene, scene
from ragraph.viz.tree import render_tree, tree_view

TEXT_FORMATS = ("tree", "dot", "mermaid", "html")
BINARY_FORMATS = ("svg", "png")  # through the Graphviz `dot` program
FORMATS = TEXT_FORMATS + BINARY_FORMATS
_TEXT = {"tree": render_tree, "dot": render_dot, "mermaid": render_mermaid, "html": render_html}


def scenes_for(graph: RAGraph, compare_with: RAGraph | None = None,
               titles: tuple[str, str] = ("original", "optimized"),
               source: RAGraph | None = None) -> list[Scene]:
    """One scene, or [original, optimized] when comparing."""
    source = source or compare_with
    if compare_with is None:
        title = graph.name if source is None else f"{graph.name}: {titles[1]}"
        return [scene(graph, title, source=source)]
    return [scene(compare_with, titles[0]), scene(graph, titles[1], source=source)]


def render(graph: RAGraph, fmt: str, compare_with: RAGraph | None = None, legend: bool = True,
           titles: tuple[str, str] = ("original", "optimized"),
           source: RAGraph | None = None) -> str | bytes:
    """The drawing as text (tree, dot, mermaid, html) or bytes (svg, png).

    With `compare_with`, that graph (the original) is drawn left of `graph` (the optimized one).
    `source` (default: `compare_with`) is the graph before the passes; sub-stages then take the
    colours of the stage they were split from.
    """
    scenes = scenes_for(graph, compare_with, titles, source)
    if fmt in _TEXT:
        return _TEXT[fmt](scenes, legend)
    if fmt in BINARY_FORMATS:
        return run_dot(render_dot(scenes, legend), fmt)
    raise RagraphError(f"error: unknown drawing format {fmt!r}; choose one of {', '.join(FORMATS)}")


__all__ = ["BINARY_FORMATS", "FORMATS", "TEXT_FORMATS", "render", "scene", "scenes_for",
           "tree_view"]
