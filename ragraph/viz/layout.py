"""Coordinates for the built-in layout: node boxes, edge paths and label anchors, in pixels.

x positions come from alternating sweeps that pull each vertex towards its neighbours in the row
above (then below) and then resolve overlaps in the row's order with the least weighted movement
(isotonic regression by pool-adjacent-violators), so a control chain stays straight while side nodes
and long edges move aside.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

from ragraph.viz.layers import Layers, build_layers
from ragraph.viz.scene import DrawNode, Scene, shorten

ID_FONT, SUB_FONT, LABEL_FONT = 13, 11, 11
# Average advance of a sans-serif glyph as a fraction of the font size (measured on DejaVu Sans).
GLYPH = 0.62
GAP_X, GAP_Y, MARGIN = 26, 14, 24
LABEL_ROW_H, DUMMY_W = 16, 10
BRANCH_W, BRANCH_H, BRANCH_GAP = 44, 20, 6  # one branch of a map, drawn inside its node
SWEEPS = 4
# How strongly a vertex keeps its wanted x when a row is packed: control nodes hold the line.
WEIGHTS = {"node": 1.0, "side": 0.15, "dummy": 0.4}


@dataclass(frozen=True)
class Box:
    x: float  # centre
    y: float  # centre
    w: float
    h: float


@dataclass(frozen=True)
class EdgePath:
    index: int  # into Scene.edges
    points: tuple[tuple[float, float], ...]  # from the edge's src to its dst
    label_at: tuple[float, float] | None
    self_loop: bool = False


@dataclass(frozen=True)
class Layout:
    boxes: dict[str, Box]
    paths: tuple[EdgePath, ...]
    width: float
    height: float


def text_width(text: str, size: float) -> float:
    return len(text) * size * GLYPH


def node_label(n: DrawNode) -> tuple[str, str]:
    return n.id, ("" if n.role == "control" else shorten(n.subtitle, 34))


def node_size(n: DrawNode) -> tuple[float, float]:
    title, sub = node_label(n)
    w = max(text_width(title, ID_FONT), text_width(sub, SUB_FONT)) + 28
    if n.branches:  # a map: a row of its branches under the title (see svg.branch_boxes)
        return max(w, n.branches * (BRANCH_W + BRANCH_GAP) + 12), 44.0 + BRANCH_H + 6
    return max(w, 64.0), (30.0 if not sub else 44.0)


def branch_boxes(n: DrawNode, b: Box) -> list[Box]:
    """The boxes of a map's branches, side by side along the bottom of its node box."""
    step = BRANCH_W + BRANCH_GAP
    left = b.x - (n.branches * step - BRANCH_GAP) / 2 + BRANCH_W / 2
    y = b.y + b.h / 2 - BRANCH_H / 2 - 5
    return [Box(left + i * step, y, BRANCH_W, BRANCH_H) for i in range(n.branches)]


def layout(sc: Scene) -> Layout:
    lay = build_layers(sc)
    sizes = {n.id: node_size(n) for n in sc.nodes}
    for dummy, i in lay.label_of.items():
        sizes[dummy] = (text_width(shorten(sc.edges[i].label, 40), LABEL_FONT) + 8, LABEL_ROW_H)
    for row in lay.rows:
        for v in row:
            sizes.setdefault(v, (DUMMY_W, LABEL_ROW_H))
    xs = _x_positions(sc, lay, sizes)
    ys, height = _y_positions(lay, sizes)
    left = min(xs[v] - sizes[v][0] / 2 for v in xs) - MARGIN
    boxes = {v: Box(xs[v] - left, ys[lay.row_of[v]], *sizes[v]) for v in xs}
    right = max(b.x + b.w / 2 for b in boxes.values()) + MARGIN
    paths = [_route_path(r, boxes, lay) for r in lay.routes]
    paths += [_self_loop(i, boxes[sc.edges[i].src]) for i in lay.self_loops]
    if lay.self_loops:
        right += 40
    paths.sort(key=lambda p: p.index)
    return Layout(boxes, tuple(paths), right, height)


def _x_positions(sc: Scene, lay: Layers, sizes: dict[str, tuple[float, float]]) -> dict[str, float]:
    side = {n.id for n in sc.nodes if n.side}
    weight = {v: WEIGHTS["dummy"] if v.startswith("\0") else WEIGHTS["side" if v in side else "node"]
              for row in lay.rows for v in row}
    up: dict[str, list[str]] = {}
    down: dict[str, list[str]] = {}
    for route in lay.routes:
        for a, b in pairwise(route.chain):
            down.setdefault(a, []).append(b)
            up.setdefault(b, []).append(a)
    xs: dict[str, float] = {}
    for row in lay.rows:
        xs.update(_pack(row, [0.0] * len(row), sizes, weight))
    for _ in range(SWEEPS):
        for rows, links in ((lay.rows, up), (lay.rows[::-1], down)):
            for row in rows:
                want = [_mean([xs[o] for o in links.get(v, [])], xs[v]) for v in row]
                xs.update(_pack(row, want, sizes, weight))
    return xs


def _mean(values: list[float], default: float) -> float:
    return sum(values) / len(values) if values else default


def _pack(row: list[str], want: list[float], sizes: dict[str, tuple[float, float]],
          weight: dict[str, float]) -> dict[str, float]:
    """x for each vertex of a row, in order, at least their half-widths plus GAP_X apart, minimising
    the weighted squared distance to `want` (pool-adjacent-violators on offset coordinates)."""
    offset, acc = [], 0.0
    for i, v in enumerate(row):
        if i:
            acc += (sizes[row[i - 1]][0] + sizes[v][0]) / 2 + GAP_X
        offset.append(acc)
    blocks: list[list[float]] = []  # [weighted sum, total weight, count]
    for i, v in enumerate(row):
        w = weight[v]
        blocks.append([w * (want[i] - offset[i]), w, 1])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            s, tw, c = blocks.pop()
            blocks[-1][0] += s
            blocks[-1][1] += tw
            blocks[-1][2] += c
    base = [b[0] / b[1] for b in blocks for _ in range(int(b[2]))]
    return {v: base[i] + offset[i] for i, v in enumerate(row)}


def _y_positions(lay: Layers, sizes: dict[str, tuple[float, float]]) -> tuple[list[float], float]:
    ys, y = [], float(MARGIN)
    for row in lay.rows:
        h = max((sizes[v][1] for v in row), default=LABEL_ROW_H)
        ys.append(y + h / 2)
        y += h + GAP_Y
    return ys, y - GAP_Y + MARGIN


def _route_path(route, boxes: dict[str, Box], lay: Layers) -> EdgePath:
    chain = [boxes[v] for v in route.chain]
    # A label's dummy is as wide as its text; the edge runs down its left side, the text beside it.
    pts = [(b.x - b.w / 2 if v in lay.label_of else b.x, b.y) for v, b in zip(route.chain, chain, strict=True)]
    # Leave the top vertex at its bottom and enter the bottom vertex at its top, sliding the port
    # towards the neighbour so fanning edges do not all start at one point.
    top, bottom = chain[0], chain[-1]
    pts[0] = (_port(top, pts[1][0]), top.y + top.h / 2)
    pts[-1] = (_port(bottom, pts[-2][0]), bottom.y - bottom.h / 2)
    label_at = next(((boxes[d].x - boxes[d].w / 2 + 5, boxes[d].y) for d in route.dummies
                     if d in lay.label_of), None)
    if route.reversed:
        pts.reverse()
    return EdgePath(route.index, tuple(pts), label_at)


def _port(box: Box, toward: float) -> float:
    reach = box.w * 0.3
    return min(max(toward, box.x - reach), box.x + reach)


def _self_loop(index: int, box: Box) -> EdgePath:
    x, y = box.x + box.w / 2, box.y
    pts = ((x, y - 6), (x + 30, y - 14), (x + 30, y + 14), (x, y + 6))
    return EdgePath(index, pts, (x + 34, y), self_loop=True)
