"""The built-in layout of the html view: control order top to bottom, loops drawn upward, nodes
never overlapping, labels beside their edges."""

from __future__ import annotations

import pytest

from ragraph.ir import END, START
from ragraph.viz.layers import back_edges
from ragraph.viz.layout import layout
from ragraph.viz.scene import scene
from tests.viz.graphs import all_graphs, multistep


@pytest.mark.parametrize("graph", all_graphs(), ids=lambda g: g.name)
def test_nodes_do_not_overlap(graph) -> None:
    boxes = list(layout(scene(graph)).boxes.items())
    real = [(k, b) for k, b in boxes if not k.startswith("\0")]
    for i, (a, p) in enumerate(real):
        for b, q in real[i + 1:]:
            apart_x = abs(p.x - q.x) >= (p.w + q.w) / 2
            apart_y = abs(p.y - q.y) >= (p.h + q.h) / 2
            assert apart_x or apart_y, f"{a} overlaps {b}"


@pytest.mark.parametrize("graph", all_graphs(), ids=lambda g: g.name)
def test_start_on_top_end_at_the_bottom(graph) -> None:
    boxes = layout(scene(graph)).boxes
    ys = [b.y for k, b in boxes.items() if not k.startswith("\0")]
    assert boxes[START].y == min(ys) and boxes[END].y == max(ys)


def test_loop_is_the_only_back_edge_and_points_up() -> None:
    sc = scene(multistep())
    back = back_edges(sc)
    assert [sc.edges[i].kind.value for i in back] == ["loop"]
    lay = layout(sc)
    (path,) = [p for p in lay.paths if p.index in back]
    assert path.points[0][1] > path.points[-1][1]  # drawn from note up to decompose
    assert path.label_at is not None


def test_every_edge_has_a_path_ending_at_its_nodes() -> None:
    sc = scene(multistep())
    lay = layout(sc)
    assert sorted(p.index for p in lay.paths) == list(range(len(sc.edges)))
    for p in lay.paths:
        e = sc.edges[p.index]
        src, dst = lay.boxes[e.src], lay.boxes[e.dst]
        assert abs(p.points[0][1] - src.y) == pytest.approx(src.h / 2)
        assert abs(p.points[-1][1] - dst.y) == pytest.approx(dst.h / 2)
