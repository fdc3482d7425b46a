"""Lowering, the compiler's last step: a verified graph to the executable program every
executor runs (`program.program.Program`: its chains, regions and chain heads)."""

from __future__ import annotations

import networkx as nx

from ragraph.ir.control import control_table
from ragraph.ir.edges import EdgeKind
from ragraph.ir.graph import RAGraph
from ragraph.ir.nodes import Generate, Merge, Node, Retrieve
from ragraph.ir.overlap import Fork, Prefetch, SpecVerify
from ragraph.ir.stages import (
    NO_LAYOUT,
    CacheLookup,
    DecodeChunk,
    EmbedQuery,
    Finish,
    Prefill,
    Probe,
    RetrieveCommit,
    SearchSteps,
)
from ragraph.passes.analysis import next_original, straight_next
from ragraph.program.program import GenerationChain, Program, Region, RetrievalChain, Unit


def lower(graph: RAGraph) -> Program:
    """The program of a verified graph: every Generate and Retrieve is a chain, whether the
    passes split it into sub-stages or not (an unsplit one is a one-unit chain)."""
    by_origin: dict[str, dict[type, Node]] = {}
    for node in graph.nodes():
        origin = getattr(node, "origin", None)
        if origin is not None:
            by_origin.setdefault(origin, {})[type(node)] = node
    retrievals, generations = {}, {}
    feeders = _lead_to_generation(graph)
    searchers = _lead_to_search(graph)
    for node in graph.nodes():
        if isinstance(node, Retrieve):
            retrievals[node.id] = _retrieval_of_node(node, feeders)
        elif isinstance(node, Generate):
            generations[node.id] = _generation_of_node(graph, node, searchers)
    for origin, chain in by_origin.items():
        if EmbedQuery in chain:
            retrievals[origin] = _retrieval_of_chain(graph, origin, chain, feeders)
        elif Prefill in chain:
            generations[origin] = _generation_of_chain(graph, origin, chain, searchers)
    regions = {n.id: _region(graph, n) for n in graph.nodes() if isinstance(n, Fork)}
    originals = [n for n in graph.nodes() if isinstance(n, Generate | Retrieve | Merge)]
    heads = frozenset(n.id for n in originals) | {_head(c).id for c in by_origin.values()}
    last = {n.id: n.id for n in originals} | {
        origin: (chain.get(RetrieveCommit) or chain[Finish]).id for origin, chain in
        by_origin.items() if RetrieveCommit in chain or Finish in chain}
    table = control_table(graph)
    units = {}
    for node in graph.nodes():
        origin = getattr(node, "origin", node.id)
        chain = generations.get(origin) or retrievals.get(origin)
        units[node.id] = Unit(node, origin, node if isinstance(node, Merge) else chain,
                              table[node.id], node.id in heads, regions.get(node.id))
    return Program(graph, retrievals, generations, regions, last, units)


def _head(chain: dict[type, Node]) -> Node:
    """A chain starts at its speculation verify point when it has one, else at its first step."""
    if SpecVerify in chain:
        return chain[SpecVerify]
    return chain.get(EmbedQuery) or chain[Prefill]


def _speculative_target(graph: RAGraph, uid: str) -> str | None:
    for edge in graph.out_edges(uid):
        if edge.kind == EdgeKind.SPECULATIVE:
            return getattr(graph.node(edge.dst), "origin", edge.dst)
    return None


def _prefetch_of(graph: RAGraph, uid: str) -> Prefetch | None:
    for edge in graph.out_edges(uid):
        node = graph.node(edge.dst)
        if edge.kind == EdgeKind.PREFETCH and isinstance(node, Prefetch):
            return node
    return None


def _lead_to_generation(graph: RAGraph) -> frozenset[str]:
    """The units after which a generation can still run in the same request (loops included)."""
    control = graph.control_graph()
    return frozenset().union(*(nx.ancestors(control, n.id) for n in graph.nodes()
                               if isinstance(n, Generate | Prefill)))


def _lead_to_search(graph: RAGraph) -> frozenset[str]:
    """The units after which a search can still run in the same request (loops included)."""
    control = graph.control_graph()
    return frozenset().union(*(nx.ancestors(control, n.id) for n in graph.nodes()
                               if isinstance(n, Retrieve | EmbedQuery)))


def _retrieval_of_node(r: Retrieve, feeders: frozenset[str]) -> RetrievalChain:
    return RetrievalChain(r.id, r.query, r.output, r.topk, r.nprobe, stepwise=False,
                          order="probe", keep=0, speculate_into=None, each=r.each,
                          feeds_generation=r.id in feeders, mode=r.mode, where=r.where)


def _retrieval_of_chain(graph: RAGraph, origin: str, chain: dict[type, Node],
                        feeders: frozenset[str]) -> RetrievalChain:
    embed, probe = chain[EmbedQuery], chain[Probe]
    search, commit = chain[SearchSteps], chain[RetrieveCommit]
    assert isinstance(embed, EmbedQuery) and isinstance(probe, Probe)  # typed by the dict key
    assert isinstance(search, SearchSteps) and isinstance(commit, RetrieveCommit)
    order = "similarity" if CacheLookup in chain else "probe"
    return RetrievalChain(origin, embed.query, commit.output, commit.topk, probe.nprobe,
                          stepwise=True, order=order, keep=commit.cache,
                          speculate_into=_speculative_target(graph, search.id),
                          each=embed.each, via=_merge_after(graph, commit),
                          feeds_generation=commit.id in feeders, mode=commit.mode,
                          where=commit.where)


def _merge_after(graph: RAGraph, commit: RetrieveCommit) -> Merge | None:
    """The merge of a map's output right after its commit (speculate starts the generation
    after it on the merge of the branches' partial top-ks)."""
    nxt = next_original(graph, commit.id, frozenset({"fork", "join"}))
    node = graph.node(nxt) if nxt is not None else None
    return node if isinstance(node, Merge) and node.input == commit.output else None


def _generation_of_node(graph: RAGraph, g: Generate, searchers: frozenset[str]
                        ) -> GenerationChain:
    return GenerationChain(g.id, g.prompt, g.sampling, g.output, g.append, NO_LAYOUT,
                           chunk=g.sampling.max_tokens, warm=None, prefetch=None, each=g.each,
                           items=g.items, chat=g.chat, system=g.system,
                           leads_to_search=g.id in searchers)


def _generation_of_chain(graph: RAGraph, origin: str, chain: dict[type, Node],
                         searchers: frozenset[str]) -> GenerationChain:
    prefill, decode, finish = chain[Prefill], chain[DecodeChunk], chain[Finish]
    assert isinstance(prefill, Prefill) and isinstance(decode, DecodeChunk)  # typed by the key
    assert isinstance(finish, Finish)
    return GenerationChain(origin, prefill.prompt, prefill.sampling, finish.output,
                           finish.append, prefill.layout, decode.chunk,
                           warm=_speculative_target(graph, decode.id),
                           prefetch=_prefetch_of(graph, prefill.id), each=prefill.each,
                           items=finish.items, chat=prefill.chat, system=prefill.system,
                           leads_to_search=prefill.id in searchers)


def _region(graph: RAGraph, fork: Fork) -> Region:
    members: list[str] = []
    cur = straight_next(graph, fork.id)
    while cur is not None and cur != fork.join:
        members.append(cur)
        cur = straight_next(graph, cur)
    preds = {m: frozenset(e.src for e in graph.in_edges(m) if e.kind == EdgeKind.DATA)
             for m in [*members, fork.join]}
    return Region(fork.id, fork.join, tuple(members), preds)
