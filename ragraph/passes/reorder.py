"""reorder: similarity-aware search for a retrieval that may follow an earlier retrieval of the
same request (HedraRAG section 5). Adds a cache-lookup step after its probe (seed the partial
top-k from the request's local cache of earlier results) and records on its search-steps the
cluster order: earlier result clusters, then the earlier probe set, then the rest. Earlier
retrievals keep their top-`cache` results in the request's local cache. Search results stay
exact: only the order of the same clusters changes, and seeds outside the probe list are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

import networkx as nx

from ragraph.ir.graph import RAGraph
from ragraph.ir.listing import node_order
from ragraph.ir.stages import CacheLookup, SearchSteps
from ragraph.passes.analysis import step, steps
from ragraph.passes.base import Pass, PassContext, positive
from ragraph.passes.rewrite import fresh_id, insert_after


@dataclass(frozen=True)
class Reorder(Pass):
    name: ClassVar[str] = "reorder"
    summary: ClassVar[str] = "local result cache lookup and similarity-aware cluster order"
    requires: ClassVar[tuple[str, ...]] = ("split-stages",)
    cache: int = 20  # results kept per earlier retrieval (HedraRAG keeps the top-20)

    def __post_init__(self) -> None:
        positive(self.name, "cache", self.cache)

    def apply(self, graph: RAGraph, ctx: PassContext) -> bool:
        control = graph.control_graph()
        order = {nid: i for i, nid in enumerate(node_order(graph))}
        commits = sorted(steps(graph, "retrieve-commit"), key=lambda n: order[n.id])
        changed = False
        kept: set[str] = set()
        for search in list(steps(graph, "search-steps")):
            assert isinstance(search, SearchSteps)  # invariant of steps(kind)
            embed = step(graph, search.origin, "embed-query")
            if embed is None:
                continue
            earlier = nx.ancestors(control, embed.id)
            history = tuple(c.origin for c in commits if c.id in earlier)  # type: ignore[attr-defined]
            if history:
                changed |= self._reorder(graph, search, history)
                kept.update(history)
        for commit in commits:
            if commit.origin in kept and commit.cache != self.cache:  # type: ignore[attr-defined]
                graph.replace_node(replace(commit, cache=self.cache))
                changed = True
        return changed

    def _reorder(self, graph: RAGraph, search: SearchSteps, history: tuple[str, ...]) -> bool:
        wanted = replace(search, order="similarity", history=history, seeded=True)
        if wanted == search:
            return False
        if step(graph, search.origin, "cache-lookup") is None:
            probe = step(graph, search.origin, "probe")
            assert probe is not None  # invariant: a chain with search-steps has a probe (verified)
            lookup = CacheLookup(id=fresh_id(graph, self.name, f"{search.origin}.cache"),
                                 origin=search.origin, history=history, span=search.span)
            insert_after(graph, probe.id, lookup)
        graph.replace_node(wanted)
        return True


