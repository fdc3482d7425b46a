"""Layer assignment and ordering for the built-in layout (Sugiyama style), in pure Python.

Cycles are broken by reversing the back edges of a depth-first search from START that follows
control edges first, so loops draw as upward arcs and the control path reads top to bottom. Layers
come from the longest path; every edge then spans an even number of rows, with one label row between
node rows (as Graphviz does), so edge labels get space of their own. Long edges pass through dummy
points, and barycentric sweeps order each row to reduce crossings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise

from ragraph.ir.nodes import START
from ragraph.viz.scene import Scene

SWEEPS = 6  # down+up barycentric sweeps; small graphs settle in two or three


@dataclass
class Route:
    """One drawn edge: its index in the scene, and the rows' vertices it passes through, in the
    layered direction (top to bottom). `reversed` when it is a back edge drawn upward."""

    index: int
    top: str
    bottom: str
    reversed: bool
    dummies: list[str] = field(default_factory=list)

    @property
    def chain(self) -> list[str]:
        return [self.top, *self.dummies, self.bottom]


@dataclass
class Layers:
    row_of: dict[str, int]
    rows: list[list[str]]
    routes: list[Route]
    self_loops: list[int]  # scene edge indices from a node to itself
    label_of: dict[str, int]  # dummy id -> scene edge index whose label sits there


def back_edges(sc: Scene) -> set[int]:
    """Indices of the edges that close a cycle in a DFS from START (control edges first)."""
    out: dict[str, list[tuple[int, str]]] = {n.id: [] for n in sc.nodes}
    for i, e in sorted(enumerate(sc.edges), key=lambda p: not p[1].kind.is_control):
        out[e.src].append((i, e.dst))
    back: set[int] = set()
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    roots = [START] + [n.id for n in sc.nodes if n.id != START]
    for root in roots:
        if root in state:
            continue
        state[root] = 1
        stack = [(root, iter(out[root]))]
        while stack:
            nid, it = stack[-1]
            step = next(it, None)
            if step is None:
                state[nid] = 2
                stack.pop()
            elif state.get(step[1]) == 1:
                back.add(step[0])
            elif step[1] not in state:
                state[step[1]] = 1
                stack.append((step[1], iter(out[step[1]])))
    return back


def assign_rows(sc: Scene, back: set[int]) -> dict[str, int]:
    """Longest-path layers (doubled: odd rows hold labels); sources sink next to what they feed."""
    preds: dict[str, set[str]] = {n.id: set() for n in sc.nodes}
    succs: dict[str, set[str]] = {n.id: set() for n in sc.nodes}
    for i, e in enumerate(sc.edges):
        if e.src == e.dst:
            continue
        a, b = (e.dst, e.src) if i in back else (e.src, e.dst)
        preds[b].add(a)
        succs[a].add(b)
    order = _topological(preds, succs, [n.id for n in sc.nodes])
    layer: dict[str, int] = {}
    for nid in order:
        layer[nid] = max((layer[p] + 1 for p in preds[nid]), default=0)
    # A side node with no inputs (a prefetch fed by nothing drawn) would float at the top.
    for nid in reversed(order):
        if not preds[nid] and nid != START and succs[nid]:
            layer[nid] = max(min(layer[s] for s in succs[nid]) - 1, 0)
    return {nid: 2 * lay for nid, lay in layer.items()}


def _topological(preds: dict[str, set[str]], succs: dict[str, set[str]], nodes: list[str]) -> list[str]:
    """Kahn's algorithm, ties broken by scene order so the result is deterministic."""
    rank = {nid: i for i, nid in enumerate(nodes)}
    waiting = {nid: len(preds[nid]) for nid in nodes}
    ready = sorted((nid for nid in nodes if waiting[nid] == 0), key=rank.__getitem__)
    order: list[str] = []
    while ready:
        nid = ready.pop(0)
        order.append(nid)
        for s in sorted(succs[nid], key=rank.__getitem__):
            waiting[s] -= 1
            if waiting[s] == 0:
                ready.append(s)
        ready.sort(key=rank.__getitem__)
    return order


def build_layers(sc: Scene) -> Layers:
    back = back_edges(sc)
    row_of = assign_rows(sc, back)
    routes: list[Route] = []
    self_loops: list[int] = []
    label_of: dict[str, int] = {}
    for i, e in enumerate(sc.edges):
        if e.src == e.dst:
            self_loops.append(i)
            continue
        rev = i in back
        top, bottom = (e.dst, e.src) if rev else (e.src, e.dst)
        route = Route(i, top, bottom, rev)
        for r in range(row_of[top] + 1, row_of[bottom]):
            dummy = f"\0{i}:{r}"
            row_of[dummy] = r
            route.dummies.append(dummy)
        if e.label:
            in_label_rows = route.dummies[::2]  # node rows are even, so these are the odd rows
            label_of[in_label_rows[(len(in_label_rows) - 1) // 2]] = i
        routes.append(route)
    rows = _initial_rows(sc, row_of, routes)
    return Layers(row_of, order_rows(rows, routes), routes, self_loops, label_of)


def _initial_rows(sc: Scene, row_of: dict[str, int], routes: list[Route]) -> list[list[str]]:
    rows: list[list[str]] = [[] for _ in range(max(row_of.values()) + 1)]
    for n in sc.nodes:
        rows[row_of[n.id]].append(n.id)
    for route in routes:
        for d in route.dummies:
            rows[row_of[d]].append(d)
    return rows


def order_rows(rows: list[list[str]], routes: list[Route]) -> list[list[str]]:
    """Barycentric sweeps; keep the ordering with the fewest crossings seen."""
    up: dict[str, list[str]] = {}
    down: dict[str, list[str]] = {}
    for route in routes:
        chain = route.chain
        for a, b in pairwise(chain):
            down.setdefault(a, []).append(b)
            up.setdefault(b, []).append(a)
    best = [list(r) for r in rows]
    best_cost = crossings(best, down)
    for _ in range(SWEEPS):
        for r in range(1, len(rows)):
            rows[r] = _by_barycenter(rows[r], rows[r - 1], up)
        for r in range(len(rows) - 2, -1, -1):
            rows[r] = _by_barycenter(rows[r], rows[r + 1], down)
        cost = crossings(rows, down)
        if cost < best_cost:
            best, best_cost = [list(r) for r in rows], cost
    return best


def _by_barycenter(row: list[str], fixed: list[str], links: dict[str, list[str]]) -> list[str]:
    pos = {nid: i for i, nid in enumerate(fixed)}

    def key(item: tuple[int, str]) -> float:
        i, nid = item
        ps = [pos[o] for o in links.get(nid, []) if o in pos]
        return sum(ps) / len(ps) if ps else float(i)  # unlinked vertices keep their place

    return [nid for _, nid in sorted(enumerate(row), key=key)]


def crossings(rows: list[list[str]], down: dict[str, list[str]]) -> int:
    total = 0
    for r in range(len(rows) - 1):
        below = {nid: i for i, nid in enumerate(rows[r + 1])}
        segs = [(i, below[b]) for i, a in enumerate(rows[r]) for b in down.get(a, []) if b in below]
        total += sum(1 for x, y in segs for u, v in segs if x < u and y > v)
    return total
