"""The knobs `ragraph tune` searches, and a workflow with its quality knobs set.

Quality knobs change the answers: nprobe, top-k (every retrieval of the workflow), the loop
rounds (every bounded loop's bound, where the workflow has one) and the share of their
`max_tokens` the intermediate generations keep (those that do not write the answer: HyDE's
passage, IRCoT's thoughts; where the workflow has some). Speed knobs change only how
fast the same answers come (the exactness rule): the pass pipeline, the requests in flight, when
the wavefront hands prompts to the engine (`SchedulerConfig.release`) and, on the simulated
engine only, its token budget per step (`LlmConfig.sim_budget`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from ragraph.errors import ConfigError
from ragraph.ir.edges import EdgeKind
from ragraph.ir.graph import RAGraph
from ragraph.ir.nodes import Generate, Retrieve
from ragraph.runtime.llm.settings import LlmConfig
from ragraph.runtime.request import ANSWER

QualityKey = tuple[int, int, int | None, float]  # nprobe, topk, rounds, gen_share


class Speed(NamedTuple):
    """A speed setting. A tuple, so `(passes, concurrency)` alone reads as one that keeps the
    release and the budget as shipped."""

    passes: str
    concurrency: int
    release: str = "step"
    budget: int | None = None  # the simulated engine's tokens a step; None: not searched


class Unsearched(NamedTuple):
    """What a results line written before the release and the budget were searched ran at:
    the run's own release and (sim) budget, the only ones tune ran then (the line's context
    pins the run's engine settings)."""

    release: str = "step"
    budget: int | None = None


AS_SHIPPED = Unsearched()  # the shipped release, no budget searched


@dataclass(frozen=True)
class Point:
    """One configuration: its quality knobs, then its speed knobs."""

    nprobe: int
    topk: int
    rounds: int | None  # None: the workflow has no loop
    passes: str
    concurrency: int
    gen_share: float = 1.0  # of each intermediate generation's max_tokens
    release: str = "step"  # `SchedulerConfig.release`
    budget: int | None = None  # `LlmConfig.sim_budget` (sim only); None: the run's, unsearched

    @property
    def quality(self) -> QualityKey:
        return (self.nprobe, self.topk, self.rounds, self.gen_share)

    @property
    def speed(self) -> Speed:
        return Speed(self.passes, self.concurrency, self.release, self.budget)

    @property
    def key(self) -> str:
        rounds = "-" if self.rounds is None else str(self.rounds)
        budget = "" if self.budget is None else f" budget={self.budget}"
        return (f"nprobe={self.nprobe} topk={self.topk} rounds={rounds} gen={self.gen_share:g} "
                f"passes={self.passes} concurrency={self.concurrency} "
                f"release={self.release}{budget}")

    def to_json(self) -> dict[str, Any]:
        return {"nprobe": self.nprobe, "topk": self.topk, "rounds": self.rounds,
                "gen_share": self.gen_share, "passes": self.passes,
                "concurrency": self.concurrency, "release": self.release,
                "budget": self.budget}

    @classmethod
    def from_json(cls, raw: dict[str, Any], before: Unsearched = AS_SHIPPED) -> Point:
        """A results line's point; one written before the release and the budget were
        searched has neither, and ran at `before`'s."""
        budget = raw.get("budget", before.budget)
        return cls(int(raw["nprobe"]), int(raw["topk"]),
                   None if raw["rounds"] is None else int(raw["rounds"]), str(raw["passes"]),
                   int(raw["concurrency"]), float(raw["gen_share"]),
                   str(raw.get("release", before.release)),
                   None if budget is None else int(budget))


@dataclass(frozen=True)
class Space:
    nprobe: tuple[int, ...]
    topk: tuple[int, ...]
    rounds: tuple[int | None, ...]
    passes: tuple[str, ...]
    concurrency: tuple[int, ...]
    gen_share: tuple[float, ...] = (1.0,)
    release: tuple[str, ...] = ("step",)
    budget: tuple[int | None, ...] = (None,)

    def __post_init__(self) -> None:
        for name in ("nprobe", "topk", "passes", "concurrency", "rounds", "gen_share",
                     "release", "budget"):
            if not getattr(self, name):
                raise ConfigError(name, "the search space needs at least one value")

    def quality_settings(self) -> list[QualityKey]:
        """Cheapest first: a setting's dominance check then sees its cheaper neighbours."""
        settings = itertools.product(self.nprobe, self.topk, self.rounds, self.gen_share)
        return sorted(settings, key=lambda q: (sum(_rank(q, self)), q[0], q[1], q[2] or 0, q[3]))

    @property
    def reference(self) -> Speed:
        """The speed setting every quality setting is measured at first: the last pass
        pipeline listed (the default -O2), the middle concurrency, the shipped release "step"
        (where searched) and the last budget listed (the run's own)."""
        release = "step" if "step" in self.release else self.release[0]
        return Speed(self.passes[-1], self.concurrency[len(self.concurrency) // 2], release,
                     self.budget[-1])

    def speed_settings(self) -> list[Speed]:
        return [Speed(*s) for s in itertools.product(self.passes, self.concurrency,
                                                     self.release, self.budget)]

    def point(self, quality: QualityKey, speed: tuple) -> Point:
        """`speed`: a `Speed`, or its leading knobs (the rest as `Speed` ships them)."""
        nprobe, topk, rounds, gen_share = quality
        passes, concurrency, release, budget = Speed(*speed)
        return Point(nprobe, topk, rounds, passes, concurrency, gen_share, release, budget)

    def holds(self, point: Point) -> bool:
        return point.quality in self.quality_settings() and point.speed in self.speed_settings()

    @property
    def size(self) -> int:
        return len(self.quality_settings()) * len(self.speed_settings())


def _rank(q: QualityKey, space: Space) -> tuple[int, ...]:
    return (space.nprobe.index(q[0]), space.topk.index(q[1]), space.rounds.index(q[2]),
            space.gen_share.index(q[3]))


def space_for(graph: RAGraph, quick: bool, nprobe: int = 32,
              llm: LlmConfig | None = None) -> Space:
    """The knobs' values around the workflow's own (its top-k, its loop bound) and the run's
    nprobe and engine (`llm`; None: llama.cpp's defaults); `quick`: two values of each
    (generation lengths as written, no "auto" release), for trying tune and for tests."""
    topk, rounds = workflow_topk(graph), workflow_rounds(graph)
    shares = (0.5, 1.0) if intermediate(graph) else (1.0,)
    release, budget = engine_speeds(llm, quick)
    if quick:
        return Space(nprobe=_values(nprobe // 4, nprobe), topk=_values(max(1, topk // 2), topk),
                     rounds=(None,) if rounds is None else _values(1, rounds),
                     passes=("-O0", "-O2"), concurrency=(2, 8), release=release, budget=budget)
    return Space(nprobe=_values(nprobe // 4, nprobe // 2, nprobe, 2 * nprobe),
                 topk=_values(max(1, topk // 2), topk, 2 * topk),
                 rounds=(None,) if rounds is None else tuple(range(1, rounds + 1)),
                 passes=("-O0", "-O2"), concurrency=(1, 4, 8, 16), gen_share=shares,
                 release=release, budget=budget)


def engine_speeds(llm: LlmConfig | None,
                  quick: bool) -> tuple[tuple[str, ...], tuple[int | None, ...]]:
    """The releases and token budgets searched on this engine (None: llama.cpp's).
    Releasing prompts per retrieval is for an engine that batches on its own
    (docs/guides/engines.md): on llama.cpp, whose batches ragraph forms on this machine's
    cores, "auto" is "step" by its rule, and "retrieval" hands nothing over within a step
    (`RetrievalSide._release`): it would only stop the search thread gathering queries into
    batches and splitting steps, so only "step" is run there. The budget is the simulated
    engine's (vLLM's max_num_batched_tokens: Sarathi-Serve's 512-2,048, vLLM's 8,192), up to
    the run's own; a real server's is its own setting, out of ragraph's reach."""
    if llm is None or llm.engine == "llamacpp":
        release: tuple[str, ...] = ("step",)
    else:
        release = ("step", "retrieval") if quick else ("step", "retrieval", "auto")
    top = run_budget(llm)
    if top is None:
        return release, (None,)
    return release, _values(top // 4, top) if quick else _values(top // 16, top // 4, top)


def run_budget(llm: LlmConfig | None) -> int | None:
    """The run's own token budget where tune searches budgets (the simulated engine's)."""
    return llm.sim_budget if llm is not None and llm.engine == "sim" else None


def shipped(graph: RAGraph, nprobe: int, passes: str, concurrency: int, release: str = "step",
            budget: int | None = None) -> Point:
    """The point the run would take without tune: the workflow as written (its top-k and loop
    bound as the space reads them, every generation's whole length) at the run's nprobe,
    passes, concurrency, release and (sim) budget (the shipped defaults, unless flags or a
    config file set them)."""
    return Point(nprobe, workflow_topk(graph), workflow_rounds(graph), passes, concurrency,
                 release=release, budget=budget)


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


def intermediate(graph: RAGraph) -> list[Generate]:
    """The generations that do not write the answer: their length is a quality knob."""
    return [n for n in graph.nodes() if isinstance(n, Generate) and n.output != ANSWER]


def with_quality(graph: RAGraph, point: Point) -> RAGraph:
    """`graph` with every retrieval's top-k, every loop's bound and the intermediate
    generations' lengths set to `point`'s (a copy)."""
    out = graph.copy()
    for node in list(out.nodes()):
        if isinstance(node, Retrieve):
            out.replace_node(replace(node, topk=point.topk))
    for node in intermediate(out) if point.gen_share != 1.0 else ():
        tokens = max(1, round(node.sampling.max_tokens * point.gen_share))
        out.replace_node(replace(node, sampling=replace(node.sampling, max_tokens=tokens)))
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
