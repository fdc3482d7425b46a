"""The knobs `ragraph tune` searches, and a workflow with its quality knobs set.

Quality knobs change the answers: nprobe, top-k (every retrieval of the workflow) and the loop
rounds (every bounded loop's bound, where the workflow has one). Speed knobs change only how
fast the same answers come (the exactness rule): the pass pipeline and the requests in flight.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from typing import Any

from ragraph.errors import ConfigError
from ragraph.ir.edges import EdgeKind
from ragraph.ir.graph import RAGraph
from ragraph.ir.nodes import Retrieve

QualityKey = tuple[int, int, int | None]  # nprobe, topk, rounds


@dataclass(frozen=True)
class Point:
    """One configuration: its quality knobs, then its speed knobs."""

    nprobe: int
    topk: int
    rounds: int | None  # None: the workflow has no loop
    passes: str
    concurrency: int

    @property
    def quality(self) -> QualityKey:
        return (self.nprobe, self.topk, self.rounds)

    @property
    def key(self) -> str:
        rounds = "-" if self.rounds is None else str(self.rounds)
        return (f"nprobe={self.nprobe} topk={self.topk} rounds={rounds} passes={self.passes} "
                f"concurrency={self.concurrency}")

    def to_json(self) -> dict[str, Any]:
        return {"nprobe": self.nprobe, "topk": self.topk, "rounds": self.rounds,
                "passes": self.passes, "concurrency": self.concurrency}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Point:
        return cls(int(raw["nprobe"]), int(raw["topk"]),
                   None if raw["rounds"] is None else int(raw["rounds"]), str(raw["passes"]),
                   int(raw["concurrency"]))


@dataclass(frozen=True)
class Space:
    nprobe: tuple[int, ...]
    topk: tuple[int, ...]
    rounds: tuple[int | None, ...]
    passes: tuple[str, ...]
    concurrency: tuple[int, ...]

    def __post_init__(self) -> None:
        for name in ("nprobe", "topk", "passes", "concurrency", "rounds"):
            if not getattr(self, name):
                raise ConfigError(name, "the search space needs at least one value")

    def quality_settings(self) -> list[QualityKey]:
        """Cheapest first: a setting's dominance check then sees its cheaper neighbours."""
        settings = itertools.product(self.nprobe, self.topk, self.rounds)
        return sorted(settings, key=lambda q: (sum(_rank(q, self)), q[0], q[1], q[2] or 0))

    @property
    def reference(self) -> tuple[str, int]:
        """The speed setting every quality setting is measured at first: the last pass
        pipeline listed (the default -O2) and the middle concurrency."""
        return self.passes[-1], self.concurrency[len(self.concurrency) // 2]

    def speed_settings(self) -> list[tuple[str, int]]:
        return list(itertools.product(self.passes, self.concurrency))

    def point(self, quality: QualityKey, speed: tuple[str, int]) -> Point:
        return Point(*quality, *speed)

    @property
    def size(self) -> int:
        return len(self.quality_settings()) * len(self.speed_settings())


def _rank(q: QualityKey, space: Space) -> tuple[int, int, int]:
    return (space.nprobe.index(q[0]), space.topk.index(q[1]), space.rounds.index(q[2]))


def space_for(graph: RAGraph, quick: bool, nprobe: int = 32) -> Space:
    """The knobs' values around the workflow's own (its top-k, its loop bound) and the run's
    nprobe; `quick`: two values of each, for trying tune and for tests."""
    topk, rounds = workflow_topk(graph), workflow_rounds(graph)
    if quick:
        return Space(nprobe=_values(nprobe // 4, nprobe), topk=_values(max(1, topk // 2), topk),
                     rounds=(None,) if rounds is None else _values(1, rounds),
                     passes=("-O0", "-O2"), concurrency=(2, 8))
    return Space(nprobe=_values(nprobe // 4, nprobe // 2, nprobe, 2 * nprobe),
                 topk=_values(max(1, topk // 2), topk, 2 * topk),
                 rounds=(None,) if rounds is None else tuple(range(1, rounds + 1)),
                 passes=("-O0", "-O2"), concurrency=(1, 4, 8, 16))


def _values(*values: int) -> tuple[int, ...]:
    return tuple(sorted({max(1, v) for v in values}))


def workflow_topk(graph: RAGraph) -> int:
    topks = [n.topk for n in graph.nodes() if isinstance(n, Retrieve)]
    if not topks:
        raise ConfigError("workflow", f"{graph.name} has no retrieval: nothing for tune to search")
    return max(topks)


def workflow_rounds(graph: RAGraph) -> int | None:
    bounds = [e.max_iters or 0 for e in graph.edges() if e.kind == EdgeKind.LOOP]
    return max(bounds) if bounds else None


def with_quality(graph: RAGraph, point: Point) -> RAGraph:
    """`graph` with every retrieval's top-k and every loop's bound set to `point`'s (a copy)."""
    out = graph.copy()
    for node in list(out.nodes()):
        if isinstance(node, Retrieve):
            out.replace_node(replace(node, topk=point.topk))
    if point.rounds is None:
        return out
    # A node's conditional edges are tried in declaration order: all of a looping node's edges
    # are put back in their order, not just the loop's.
    for src in {e.src for e in out.edges() if e.kind == EdgeKind.LOOP}:
        edges = out.out_edges(src)
        for edge in edges:
            out.remove_edge(edge)
        for edge in edges:
            looped = edge.kind == EdgeKind.LOOP
            out.insert_edge(replace(edge, max_iters=point.rounds) if looped else edge)
    return out
