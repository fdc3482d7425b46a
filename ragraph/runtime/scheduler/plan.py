"""What the scheduler may do for each node of a workflow, read off the compiled graph.

The scheduler walks the SOURCE graph's control semantics (`ragraph.ir.control.choose_edge`): that is
what makes every answer identical to the -O0 run. The optimized graph says, per original node, what
freedom the passes granted: cut a retrieval into budgeted search steps and in which cluster order,
seed it from the request's result cache, start the next generation speculatively on partial results,
warm a later retrieval from a partial generation, prefetch clusters while a generation runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ragraph.ir.edges import EdgeKind
from ragraph.ir.graph import RAGraph
from ragraph.ir.nodes import Generate, Retrieve


@dataclass(frozen=True)
class RetrievalPlan:
    stepwise: bool = False  # split-stages: budgeted steps interleaved with other requests
    order: str = "probe"  # "probe" | "similarity" (reorder)
    seeded: bool = False  # reorder: seed the partial top-k from the request's result cache
    speculate_into: str | None = None  # speculate: the generation that may start on partials


@dataclass(frozen=True)
class GenerationPlan:
    warm_retrieval: str | None = None  # speculate{retrieval}: retrieval warmed by partial text
    prefetch_for: str | None = None  # prefetch: retrieval whose clusters load during this node
    prefetch_known: tuple[str, ...] = ()


@dataclass(frozen=True)
class ExecutionPlan:
    source: RAGraph
    passes: str = "-O0"
    retrievals: dict[str, RetrievalPlan] = field(default_factory=dict)
    generations: dict[str, GenerationPlan] = field(default_factory=dict)

    def retrieval(self, node_id: str) -> RetrievalPlan:
        return self.retrievals.get(node_id, RetrievalPlan())

    def generation(self, node_id: str) -> GenerationPlan:
        return self.generations.get(node_id, GenerationPlan())

    @classmethod
    def unoptimized(cls, graph: RAGraph) -> ExecutionPlan:
        return cls(source=graph)

    @classmethod
    def from_compiled(cls, compiled) -> ExecutionPlan:
        """Read the plan off a `ragraph.passes.CompiledWorkflow`."""
        graph: RAGraph = compiled.graph
        source: RAGraph = compiled.source
        rets: dict[str, RetrievalPlan] = {}
        gens: dict[str, GenerationPlan] = {}
        for node in source.nodes():
            if isinstance(node, Retrieve):
                rets[node.id] = _retrieval_plan(graph, node.id)
            elif isinstance(node, Generate):
                gens[node.id] = _generation_plan(graph, node.id)
        return cls(source=source, passes=compiled.passes, retrievals=rets, generations=gens)


def _origin(graph: RAGraph, nid: str) -> str:
    return getattr(graph.node(nid), "origin", nid)


def _chain(graph: RAGraph, origin: str) -> dict[str, object]:
    return {n.kind: n for n in graph.nodes() if getattr(n, "origin", None) == origin}


def _speculative_targets(graph: RAGraph, origin: str) -> list[str]:
    return [_origin(graph, e.dst) for e in graph.edges(frozenset({EdgeKind.SPECULATIVE}))
            if _origin(graph, e.src) == origin]


def _retrieval_plan(graph: RAGraph, rid: str) -> RetrievalPlan:
    chain = _chain(graph, rid)
    steps = chain.get("search-steps")
    if steps is None:
        return RetrievalPlan()
    targets = _speculative_targets(graph, rid)
    return RetrievalPlan(
        stepwise=True,
        order=getattr(steps, "order", "probe"),
        seeded=bool(getattr(steps, "seeded", False)),
        speculate_into=targets[0] if targets else None,
    )


def _generation_plan(graph: RAGraph, gid: str) -> GenerationPlan:
    targets = _speculative_targets(graph, gid)
    prefetch = next((n for n in graph.nodes() if n.kind == "prefetch"
                     and getattr(n, "source", None) == gid), None)
    return GenerationPlan(
        warm_retrieval=targets[0] if targets else None,
        prefetch_for=getattr(prefetch, "target", None),
        prefetch_known=tuple(getattr(prefetch, "known", ())),
    )
