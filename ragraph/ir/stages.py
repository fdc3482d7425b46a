"""Node kinds the compiler passes add, and what the runtime must do with each.

A pass replaces an original Retrieve/Generate node `x` by a chain of sub-stage nodes whose `origin` is
`x` (ids `x.embed`, `x.prefill`, ...), linked by NEXT edges. Chains:

    retrieval   [x.verify] -> x.embed -> x.probe -> [x.cache] -> x.search -> x.commit
    generation  [x.verify] -> x.prefill -> x.decode -> x.finish

Only the last sub-stage (`commit`, `finish`) assigns the original output variable, so a request's
visible effects happen at the same points, in the same order, as in the unsplit graph.

Sub-stages pass intermediate values through *slots*: names `%x.qvec`, `%x.kv`, ... (not identifiers,
so templates and conditions cannot name them). The runtime keeps them per request, per origin; they
appear in `reads()`/`writes()` so the def-use analysis (rewire) orders sub-stages like any other
dependency. The overlap kinds (spec-verify, fork, join, prefetch) live in `ragraph.ir.overlap`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ragraph.errors import WorkflowError
from ragraph.ir.chat import flat_prompt
from ragraph.ir.edges import EdgeKind
from ragraph.ir.fanout import Binding, template_reads
from ragraph.ir.filters import Condition
from ragraph.ir.nodes import Node, Sampling, check_chat, register_node
from ragraph.ir.template import Template


def slot(origin: str, what: str) -> str:
    """The name of a sub-stage slot: request-private scratch of one origin node."""
    return f"%{origin}.{what}"


@dataclass(frozen=True, kw_only=True)
class SubStage(Node):
    """One step of an original node `origin`. `follows` names the kinds that may precede it in
    its chain (empty: it may head the chain); `last` marks the step that writes the output."""

    role: ClassVar[str] = "substage"
    follows: ClassVar[frozenset[str]] = frozenset()
    may_head: ClassVar[bool] = False
    last: ClassVar[bool] = False
    origin: str

    def check(self, graph: Any) -> None:
        ins = graph.in_edges(self.id, control_only=True)
        chained = [e for e in ins if _same_chain(graph, e.src, self.origin, self.follows)]
        if self.follows and not (self.may_head and not chained):
            if len(ins) != 1 or len(chained) != 1 or ins[0].kind != EdgeKind.NEXT:
                raise _chain_error(graph, self, "must directly follow one of its chain's "
                                   f"{'/'.join(sorted(self.follows))} sub-stages")
        if not self.last:
            outs = graph.out_edges(self.id, control_only=True)
            if len(outs) != 1 or outs[0].kind != EdgeKind.NEXT or _origin(graph, outs[0].dst) != \
                    self.origin:
                raise _chain_error(graph, self, "must lead by one plain edge to the next sub-stage "
                                   f"of {self.origin!r}")


def _origin(graph: Any, nid: str) -> str | None:
    return getattr(graph.node(nid), "origin", None)


def _same_chain(graph: Any, nid: str, origin: str, kinds: frozenset[str]) -> bool:
    node = graph.node(nid)
    return getattr(node, "origin", None) == origin and node.kind in kinds


def _chain_error(graph: Any, node: Node, what: str) -> WorkflowError:
    from ragraph.ir.verify import fail

    return fail(graph, f"sub-stage {node.id!r} ({node.kind}) {what}", node)


# ----- retrieval chain ---------------------------------------------------------------------------

@register_node
@dataclass(frozen=True, kw_only=True)
class EmbedQuery(SubStage):
    """Render `query` from the request's variables and embed it into slot qvec. `guarded`: a
    spec-verify node precedes it (speculative retrieval); then it reads that node's verdict and,
    when the verdict adopted the speculative instance, reuses that instance's embedding.
    `each` (a map): one query per branch; the chain's later steps run every branch."""

    kind: ClassVar[str] = "embed-query"
    follows: ClassVar[frozenset[str]] = frozenset({"spec-verify"})
    may_head: ClassVar[bool] = True
    query: Template
    guarded: bool = False
    each: tuple[Binding, ...] = ()

    def reads(self) -> frozenset[str]:
        extra = {slot(self.origin, "verdict")} if self.guarded else set()
        return template_reads(self.query, self.each) | extra

    def writes(self) -> frozenset[str]:
        return frozenset({slot(self.origin, "qvec"), slot(self.origin, "qtext")})


@register_node
@dataclass(frozen=True, kw_only=True)
class Probe(SubStage):
    """Run the coarse quantizer on qvec: the probe list (`nprobe` clusters, None: the index's
    default) into slot probes. The set of clusters searched is fixed here and never changes."""

    kind: ClassVar[str] = "probe"
    follows: ClassVar[frozenset[str]] = frozenset({"embed-query"})
    nprobe: int | None = None

    def reads(self) -> frozenset[str]:
        return frozenset({slot(self.origin, "qvec")})

    def writes(self) -> frozenset[str]:
        return frozenset({slot(self.origin, "probes")})


@register_node
@dataclass(frozen=True, kw_only=True)
class CacheLookup(SubStage):
    """(reorder) Seed the partial top-k from the request's local result cache: score qvec exactly
    against the cached results of the most recently committed retrieval among `history` whose
    cluster is in this probe list (others are ignored, so results stay exactly those of a full
    search). Nothing cached yet: an empty seed."""

    kind: ClassVar[str] = "cache-lookup"
    follows: ClassVar[frozenset[str]] = frozenset({"probe"})
    history: tuple[str, ...]

    def reads(self) -> frozenset[str]:
        return frozenset({slot(self.origin, "qvec"), slot(self.origin, "probes")})

    def writes(self) -> frozenset[str]:
        return frozenset({slot(self.origin, "seed")})


@register_node
@dataclass(frozen=True, kw_only=True)
class SearchSteps(SubStage):
    """Search the probe list in steps. The runtime REPEATS this node: each repetition searches the
    next clusters the cycle's time budget allows (batched with other requests' steps) and merges
    them into the partial top-k (slot topk); it completes when the probe list is exhausted.

    `order`: "probe" searches clusters in probe-list order; "similarity" (reorder) first the
    clusters that held the results of the most recently committed retrieval among `history`, then
    the rest of that retrieval's probe list, then the others, each group in probe-list order.
    Either way the same clusters are searched, so the final top-k is exact. `seeded`: start from
    the cache-lookup seed (duplicates of seeded passages are skipped)."""

    kind: ClassVar[str] = "search-steps"
    follows: ClassVar[frozenset[str]] = frozenset({"probe", "cache-lookup"})
    topk: int = 5
    order: str = "probe"
    history: tuple[str, ...] = ()
    seeded: bool = False

    def reads(self) -> frozenset[str]:
        names = {slot(self.origin, "qvec"), slot(self.origin, "probes")}
        return frozenset(names | ({slot(self.origin, "seed")} if self.seeded else set()))

    def writes(self) -> frozenset[str]:
        return frozenset({slot(self.origin, "topk")})


@register_node
@dataclass(frozen=True, kw_only=True)
class RetrieveCommit(SubStage):
    """Assign the final top-k passages to `output` (the original retrieval's only visible effect).
    `cache` > 0 (reorder): also keep this retrieval's top-`cache` results, their clusters and its
    probe list in the request's local result cache (the search keeps max(topk, cache) results).
    `mapped`: the chain is a map; the output is the list of every branch's top-k."""

    kind: ClassVar[str] = "retrieve-commit"
    follows: ClassVar[frozenset[str]] = frozenset({"search-steps"})
    last: ClassVar[bool] = True
    output: str
    topk: int = 5
    cache: int = 0
    mapped: bool = False
    mode: str = "dense"  # the original retrieval's (hybrid: fused with the keyword index)
    where: tuple[Condition, ...] = ()  # the original retrieval's filter (ir/filters.py)

    def reads(self) -> frozenset[str]:
        return frozenset({slot(self.origin, "topk")})

    def writes(self) -> frozenset[str]:
        return frozenset({self.output})

    def output_type(self, types: Mapping[str, str]) -> str | None:
        return "passages list" if self.mapped else "passages"


# ----- generation chain --------------------------------------------------------------------------

@dataclass(frozen=True)
class PromptLayout:
    """(prefix-layout) Where the retrieved documents sit in a rendered prompt, for prefix caching.

    The rendered prompt is [static][documents][rest]: `static` the literal text before the first
    documents hole (identical in every request), `docs` the passage variables rendered there, in
    order, each passage by `format_passages` (one document per line). `reusable` is false when a
    per-request value precedes the documents (their KV then cannot be shared across requests)."""

    docs: tuple[str, ...] = ()
    static: str = ""
    reusable: bool = False


NO_LAYOUT = PromptLayout()  # a prompt with no documents, or prefix-layout did not run


@register_node
@dataclass(frozen=True, kw_only=True)
class Prefill(SubStage):
    """Render `prompt`, submit it to the LLM engine with `sampling`, run its prefill. `layout`
    (prefix-layout) tells the engine the document segments, in `flat_prompt`. `guarded`, `each`:
    see EmbedQuery. `chat`, `system`: as on Generate."""

    kind: ClassVar[str] = "prefill"
    follows: ClassVar[frozenset[str]] = frozenset({"spec-verify"})
    may_head: ClassVar[bool] = True
    prompt: Template
    sampling: Sampling = Sampling()
    layout: PromptLayout = NO_LAYOUT
    guarded: bool = False
    each: tuple[Binding, ...] = ()
    chat: bool = False
    system: Template | None = None

    def __post_init__(self) -> None:
        check_chat(self.id, self.chat, self.system)

    def reads(self) -> frozenset[str]:
        extra = {slot(self.origin, "verdict")} if self.guarded else set()
        return template_reads(self.flat_prompt, self.each) | extra

    @property
    def flat_prompt(self) -> Template:
        return flat_prompt(self.prompt, self.system)

    def writes(self) -> frozenset[str]:
        return frozenset({slot(self.origin, "kv")})


@register_node
@dataclass(frozen=True, kw_only=True)
class DecodeChunk(SubStage):
    """Decode. The runtime REPEATS this node: each repetition decodes up to `chunk` tokens (in one
    batch with other requests); it completes when the engine reports the sequence finished (stop,
    EOS or max_tokens). The text so far is slot text."""

    kind: ClassVar[str] = "decode"
    follows: ClassVar[frozenset[str]] = frozenset({"prefill"})
    chunk: int = 16

    def reads(self) -> frozenset[str]:
        return frozenset({slot(self.origin, "kv")})

    def writes(self) -> frozenset[str]:
        return frozenset({slot(self.origin, "text")})


@register_node
@dataclass(frozen=True, kw_only=True)
class Finish(SubStage):
    """Assign the generated text to `output` (append a line when `append`), exactly as the
    original Generate node does: the generation's only visible effect. `items`: split the text
    into a list of at most that many items; `mapped`: assign the list of every branch's text."""

    kind: ClassVar[str] = "finish"
    follows: ClassVar[frozenset[str]] = frozenset({"decode"})
    last: ClassVar[bool] = True
    output: str
    append: bool = False
    items: int | None = None
    mapped: bool = False

    def reads(self) -> frozenset[str]:
        return frozenset({slot(self.origin, "text")} | ({self.output} if self.append else set()))

    def writes(self) -> frozenset[str]:
        return frozenset({self.output})

    def output_type(self, types: Mapping[str, str]) -> str | None:
        return "text list" if self.items or self.mapped else "text"


# Registers the overlap kinds (spec-verify, fork, join, prefetch) with every import of this module.
from ragraph.ir import overlap as _overlap  # noqa: E402,F401
