"""split-stages: each Retrieval becomes embed -> probe -> search-steps -> commit, each Generation
prefill -> decode -> finish (HedraRAG sub-stage partitioning). The runtime repeats search-steps
(clusters per step chosen by the time budget mb) and decode (`chunk` tokens per step), so sub-stages
of many requests batch together; only the last step of a chain assigns the original output. A map
keeps one chain: its head renders one query or prompt per branch and every later step runs all
branches, so a map's searches share search steps and its generations share decode batches."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ragraph.ir.graph import RAGraph
from ragraph.ir.nodes import Generate, Node, Retrieve
from ragraph.ir.stages import (
    DecodeChunk,
    EmbedQuery,
    Finish,
    Prefill,
    Probe,
    RetrieveCommit,
    SearchSteps,
)
from ragraph.passes.base import Pass, PassContext, positive
from ragraph.passes.rewrite import fresh_id, replace_with_chain


@dataclass(frozen=True)
class SplitStages(Pass):
    name: ClassVar[str] = "split-stages"
    summary: ClassVar[str] = "split retrievals and generations into sub-stage chains"
    chunk: int = 16  # decode tokens per repetition of a decode sub-stage
    retrieval: bool = True
    generation: bool = True

    def __post_init__(self) -> None:
        positive(self.name, "chunk", self.chunk)

    def apply(self, graph: RAGraph, ctx: PassContext) -> bool:
        changed = False
        for node in list(graph.nodes()):
            if type(node) is Retrieve and self.retrieval:
                replace_with_chain(graph, node.id, self._retrieval(graph, node))
                changed = True
            elif type(node) is Generate and self.generation:
                replace_with_chain(graph, node.id, self._generation(graph, node))
                changed = True
        return changed

    def _retrieval(self, graph: RAGraph, r: Retrieve) -> list[Node]:
        ids = [fresh_id(graph, self.name, f"{r.id}.{s}") for s in ("embed", "probe", "search",
                                                                   "commit")]
        return [
            EmbedQuery(id=ids[0], origin=r.id, query=r.query, each=r.each, span=r.span),
            Probe(id=ids[1], origin=r.id, nprobe=r.nprobe, span=r.span),
            SearchSteps(id=ids[2], origin=r.id, topk=r.topk, span=r.span),
            RetrieveCommit(id=ids[3], origin=r.id, output=r.output, topk=r.topk,
                           mapped=bool(r.each), mode=r.mode, where=r.where,
                           span=r.span),
        ]

    def _generation(self, graph: RAGraph, g: Generate) -> list[Node]:
        ids = [fresh_id(graph, self.name, f"{g.id}.{s}") for s in ("prefill", "decode", "finish")]
        return [
            Prefill(id=ids[0], origin=g.id, prompt=g.prompt, sampling=g.sampling, each=g.each,
                    chat=g.chat, system=g.system, span=g.span),
            DecodeChunk(id=ids[1], origin=g.id, chunk=min(self.chunk, g.sampling.max_tokens),
                        span=g.span),
            Finish(id=ids[2], origin=g.id, output=g.output, append=g.append, items=g.items,
                   mapped=bool(g.each), span=g.span),
        ]
