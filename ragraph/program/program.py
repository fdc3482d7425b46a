"""The executable program every executor runs: what `passes.lower` makes of a verified graph
(`compile()` lowers both the optimized graph and the source, so an executor never lowers or
reinterprets a graph at run time).

Every node of the compiled graph is a unit. A request walks the units along control edges
(`choose_edge`, the semantics every executor shares), except inside a rewired region, where a
unit starts once its DATA predecessors completed (`Region`). Units belong to chains: the
sub-stages of one original Generate or Retrieve node (or the unsplit node itself, at -O0),
typed from the passes' own node classes, so the engines' sides get their work without reading
string kinds back out of the graph.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ragraph.ir.chat import flat_prompt
from ragraph.ir.control import Successor
from ragraph.ir.fanout import Binding
from ragraph.ir.filters import Condition
from ragraph.ir.graph import RAGraph
from ragraph.ir.nodes import Merge, Node, Sampling
from ragraph.ir.overlap import Prefetch
from ragraph.ir.stages import PromptLayout
from ragraph.ir.template import Template


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


C = TypeVar("C", GenerationChain, RetrievalChain, Merge, None)


@dataclass(frozen=True)
class Unit(Generic[C]):
    """One unit as execution needs it, resolved at lowering (torch.fx's run_node takes its
    arguments resolved the same way): its node, the chain it belongs to (typed: a generation's,
    a retrieval's; a merge is its own one-unit chain; None for the others), its control
    successors, and the region it starts (a Fork's). `head`: the first unit of its chain (or an original node), the point the
    user's path records its origin at."""

    node: Node
    origin: str
    chain: C
    successors: tuple[Successor, ...]
    head: bool = False
    region: Region | None = None

    @property
    def id(self) -> str:
        return self.node.id

    @property
    def kind(self) -> str:
        return self.node.kind


@dataclass(frozen=True)
class Program:
    graph: RAGraph
    retrievals: Mapping[str, RetrievalChain]
    generations: Mapping[str, GenerationChain]
    regions: Mapping[str, Region]  # by fork id
    last: Mapping[str, str]  # origin -> the unit that assigns its output (commit, finish, itself)
    units: Mapping[str, Unit[Any]]  # every node of `graph`, by id

    @property
    def name(self) -> str:
        return self.graph.name

    def unit(self, uid: str) -> Node:
        return self.units[uid].node

    @property
    def heads(self) -> frozenset[str]:
        """The units each original node's chain starts with."""
        return frozenset(uid for uid, unit in self.units.items() if unit.head)
