"""A map is drawn as one node with its multiplicity, its branches side by side in the HTML view,
before and after the passes split it into a chain."""

from __future__ import annotations

import re

from ragraph.passes import compile
from ragraph.viz import render
from tests.viz.graphs import fusion


def test_html_draws_a_map_as_one_node_with_its_branches_side_by_side():
    page = render(fusion(), "html")
    node = re.search(r'<g class="node role-search"[^>]*>.*?</g>\s*</g>\n', page, re.S)
    assert node is not None and ">search</text>" in node.group()
    assert "retrieve \u00d7\u22643" in node.group()
    branches = re.findall(r'<g class="branch"><rect x="([0-9.]+)" y="([0-9.]+)"', node.group())
    assert [f"q[{i}]" in node.group() for i in (1, 2, 3)] == [True] * 3
    xs, ys = [float(x) for x, _ in branches], {y for _, y in branches}
    assert len(xs) == 3 and len(ys) == 1 and xs == sorted(xs)  # one row, left to right


def test_every_step_of_a_split_map_keeps_its_multiplicity():
    graph = compile(fusion(), "-O2").graph
    tree = render(graph, "tree")
    for step in ("search.embed", "search.probe", "search.search", "search.commit"):
        line = next(li for li in tree.splitlines() if f"\u25a3 {step}  " in li)
        assert "map \u00d7\u22643 (q ...)" in line, line
    assert "fuse  merge" in tree


def test_text_formats_name_the_multiplicity():
    for fmt in ("dot", "mermaid"):
        assert "\u00d7\u22643" in render(fusion(), fmt), fmt
