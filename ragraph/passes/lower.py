"""Lowering, the compiler's last step: a verified graph to the executable program every
executor runs (`compile()` lowers both the optimized graph and the source, so an executor never
lowers or reinterprets a graph at run time).

Every node of the compiled graph is a unit. A request walks the units along control edges
(`choose_edge`, the semantics every executor shares), except inside a rewired region, where a
unit starts once its DATA predecessors completed (`Region`). Units belong to chains: the
sub-stages of one original Generate or Retrieve node (or the unsplit node itself, at -O0),
typed here from the passes' own node classes, so the engines' sides get their work without
reading string kinds back out of the graph.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import networkx as nx

from ragraph.ir.chat import flat_prompt
from ragraph.ir.edges import EdgeKind
from ragraph.ir.fanout import Binding
from ragraph.ir.filters import Condition
from ragraph.ir.graph import RAGraph
from ragraph.ir.nodes import Generate, Merge, Node, Retrieve, Sampling
from ragraph.ir.overlap import Fork, Prefetch, SpecVerify
from ragraph.ir.stages import (
    NO_LAYOUT,
    CacheLookup,
    DecodeChunk,
    EmbedQuery,
    Finish,
    Prefill,
    Probe,
    PromptLayout,
    RetrieveCommit,
    SearchSteps,
)
from ragraph.ir.template import Template
from ragraph.passes.analysis import next_original, straight_next


@dataclass(frozen=True)
class RetrievalChain:
    """One original retrieval as the search side runs it: split into budgeted steps
    (`stepwise`) or searched whole (an unsplit Retrieve unit)."""

    origin: str
    query: Template
    output: str
    topk: int
    nprobe: int | None
    stepwise: bool
    order: str  # "probe" | "similarity" (a cache-lookup orders clusters by the local cache)
    keep: int  # results kept in the request's local cache at commit (reorder's `cache`)
    speculate_into: str | None  # the generation origin a partial top-k may start early
    each: tuple[Binding, ...] = ()  # a map: one search per branch
    via: Merge | None = None  # the merge between a map and the generation it may start early
    # A generation can follow it in its request: finishing it early lets that generation
    # overlap the search (else its request has only searches, or nothing, left).
    feeds_generation: bool = True
    mode: str = "dense"  # the retrieve node's ranking: dense, or hybrid with keywords
    where: tuple[Condition, ...] = ()  # the retrieve node's filter (ir/filters.py)


@dataclass(frozen=True)
class GenerationChain:
    origin: str
    prompt: Template
    sampling: Sampling
    output: str
    append: bool
    layout: PromptLayout
    chunk: int  # decode tokens per repetition of the decode unit
    warm: str | None  # the retrieval origin a partial text may warm (speculative retrieval)
    prefetch: Prefetch | None  # TeleRAG: clusters to load while this generation runs
    each: tuple[Binding, ...] = ()  # a map: one generation per branch
    items: int | None = None  # a list output: the text split into at most this many items
    chat: bool = False  # a chat turn: `prompt` the user message, `system` the system message
    system: Template | None = None
    # A search can still run after it in its request (HyDE's passage, IRG's loop): on the
    # workflow's critical path, its prompt goes to the engine first.
    leads_to_search: bool = False

    @property
    def flat_prompt(self) -> Template:
        """What `layout` is laid out on (`ir.chat`)."""
        return flat_prompt(self.prompt, self.system)


@dataclass(frozen=True)
class Region:
    """A rewired straight-line region: members run as their DATA predecessors allow."""

    fork: str
    join: str
    members: tuple[str, ...]
    data_preds: Mapping[str, frozenset[str]]  # members and the join


@dataclass(frozen=True)
class Program:
    graph: RAGraph
    retrievals: Mapping[str, RetrievalChain]
    generations: Mapping[str, GenerationChain]
    regions: Mapping[str, Region]  # by fork id
    heads: frozenset[str]  # the unit each original node's chain starts with
    last: Mapping[str, str]  # origin -> the unit that assigns its output (commit, finish, itself)

    @property
    def name(self) -> str:
        return self.graph.name

    def unit(self, uid: str) -> Node:
        return self.graph.node(uid)

    def origin(self, uid: str) -> str:
        return getattr(self.unit(uid), "origin", uid)


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
    return Program(graph, retrievals, generations, regions, heads, last)


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
