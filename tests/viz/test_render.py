"""Every drawing format on builder graphs, including a graph with the node and edge kinds the passes
add: the output parses where a checker exists, names every node, and tells the edge kinds apart."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from ragraph.errors import RagraphError
from ragraph.ir import EdgeKind
from ragraph.viz import FORMATS, TEXT_FORMATS, render
from ragraph.viz.style import EDGE_STYLES, NODE_STYLES
from tests.viz.graphs import all_graphs, hyde, multistep, optimized

GRAPHS = {g.name + str(len(list(g.nodes()))): g for g in all_graphs()}
HAS_DOT = shutil.which("dot") is not None


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
@pytest.mark.parametrize("key", sorted(GRAPHS))
def test_every_node_is_drawn(fmt: str, key: str) -> None:
    graph = GRAPHS[key]
    text = render(graph, fmt)
    assert isinstance(text, str)
    for node in graph.nodes():
        assert node.id in text, f"{fmt} drawing of {key} lacks node {node.id}"


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_same_graph_same_drawing(fmt: str) -> None:
    assert render(optimized(), fmt) == render(optimized(), fmt)


def test_dot_has_a_statement_per_edge() -> None:
    graph = multistep()
    text = render(graph, "dot")
    assert text.startswith('digraph "multistep" {')
    for edge in graph.edges():
        assert f'"{edge.src}" -> "{edge.dst}"' in text
    assert 'label="\u21bb \u22644"' in text  # the loop bound
    assert "subq contains" in text  # the condition


def test_mermaid_is_a_flowchart_with_one_link_style_per_arrow() -> None:
    text = render(optimized(), "mermaid", compare_with=hyde())
    assert text.startswith("flowchart TB\n")
    arrows = re.findall(r" (?:-->|==>|-\.->)", text)
    styles = re.findall(r"^  linkStyle \d+ ", text, re.M)
    assert len(arrows) == len(styles) > 0
    # Labels never carry raw quotes or angle brackets into Mermaid's syntax.
    assert '"<' not in text.replace('"<br/>', "")


def test_html_is_offline_and_has_an_svg() -> None:
    page = render(optimized(), "html", compare_with=hyde())
    assert page.startswith("<!DOCTYPE html>") and page.count("<svg") >= 3
    assert not re.search(r"https?://", page)
    assert not re.search(r"<(script|link|img|iframe)\b", page)
    assert "Write a passage that answers: {question}" in page  # prompts in hover titles


def test_pass_added_edges_draw_distinctly() -> None:
    kinds = [EdgeKind.DATA, EdgeKind.SPECULATIVE, EdgeKind.PREFETCH, EdgeKind.COMMIT,
             EdgeKind.ROLLBACK, EdgeKind.NEXT]
    looks = {(EDGE_STYLES[k].line, EDGE_STYLES[k].color) for k in EdgeKind}
    assert len(looks) == len(EdgeKind)
    roles = {(s.shape, s.fill) for s in NODE_STYLES.values()}
    assert len(roles) == len(NODE_STYLES)
    html = render(optimized(), "html", legend=False)
    dot = render(optimized(), "dot", legend=False)
    for kind in kinds:
        assert f'class="edge kind-{kind.value}"' in html
        assert f'color="{EDGE_STYLES[kind].color}"' in dot
    assert "peripheries=2" in dot and "shape=parallelogram" in dot and "shape=hexagon" in dot


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_legend_names_what_the_passes_add(fmt: str) -> None:
    text = render(hyde(), fmt)
    for words in ("sub-stage", "speculative", "prefetch node", "rewired dependency"):
        assert words in text


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_compare_draws_both_graphs(fmt: str) -> None:
    text = render(optimized(), fmt, compare_with=hyde())
    assert "original" in text and "optimized" in text
    assert "1.prefetch" in text and "1.s1" in text  # only in the optimized graph
    if fmt == "dot":
        assert '"original/1"' in text and '"optimized/1"' in text


@pytest.mark.skipif(not HAS_DOT, reason="Graphviz `dot` is not installed")
@pytest.mark.parametrize("key", sorted(GRAPHS))
def test_graphviz_accepts_the_dot_text(key: str) -> None:
    for compare in (None, hyde()):
        done = subprocess.run(["dot", "-Tsvg"], input=render(GRAPHS[key], "dot", compare).encode(),
                              capture_output=True, timeout=60, check=False)
        assert done.returncode == 0 and not done.stderr, done.stderr.decode()
        assert b"<svg" in done.stdout


@pytest.mark.skipif(not HAS_DOT, reason="Graphviz `dot` is not installed")
def test_svg_and_png_through_graphviz() -> None:
    assert b"<svg" in render(multistep(), "svg")
    assert render(multistep(), "png")[:8] == b"\x89PNG\r\n\x1a\n"


def test_svg_without_graphviz_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(RagraphError, match="apt-get install graphviz"):
        render(multistep(), "svg")


def test_unknown_format_is_a_ragraph_error() -> None:
    assert "svg" in FORMATS
    with pytest.raises(RagraphError, match="unknown drawing format"):
        render(hyde(), "pdf")
