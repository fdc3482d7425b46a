"""Typed node payloads of a RAGraph.

The user writes Generate and Retrieve nodes between START and END. Passes add sub-stage, speculative
and prefetch nodes: each is a frozen dataclass registered with `@register_node`, so listing, JSON and
drawing handle it without special cases.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ragraph.errors import Span, WorkflowError
from ragraph.ir.chat import flat_prompt
from ragraph.ir.fanout import MERGES, RRF_K, Binding, template_reads
from ragraph.ir.filters import Condition, check_conditions
from ragraph.ir.template import Template

START = "START"
END = "END"
RESERVED_IDS = frozenset({START, END})
RETRIEVE_MODES = ("dense", "hybrid")

NODE_TYPES: dict[str, type[Node]] = {}


def register_node(cls: type[Node]) -> type[Node]:
    """Make a node kind known to serialization and drawing."""
    NODE_TYPES[cls.kind] = cls
    return cls


@dataclass(frozen=True, kw_only=True)
class Node:
    kind: ClassVar[str] = "node"
    # Drawing hint: "control", "llm", "search", "substage", "prefetch", "speculative".
    role: ClassVar[str] = "control"
    # False for side nodes (e.g. prefetch) that hang off the control path on non-control edges.
    in_control_flow: ClassVar[bool] = True
    id: str
    span: Span | None = field(default=None, compare=False, repr=False)

    def reads(self) -> frozenset[str]:
        """Request variables this node reads."""
        return frozenset()

    def writes(self) -> frozenset[str]:
        """Request variables this node assigns."""
        return frozenset()

    def output_type(self, types: Mapping[str, str]) -> str | None:
        """The type of what it assigns ('text', 'passages', 'text list', ...), given the types
        of the other variables; None for nodes the type check does not track."""
        return None

    def check(self, graph: Any) -> None:
        """Kind-specific invariants (sub-stage chains, commit points); raise WorkflowError."""


@register_node
@dataclass(frozen=True, kw_only=True)
class Start(Node):
    kind: ClassVar[str] = "start"


@register_node
@dataclass(frozen=True, kw_only=True)
class End(Node):
    kind: ClassVar[str] = "end"


@dataclass(frozen=True, kw_only=True)
class Sampling:
    """Sampling parameters of a generation, as the workflow states them and as the engines take
    them. Greedy (temperature 0) by default: reproducible. `stop` has OpenAI's meaning: the text
    ends before the first stop string, which is not part of it."""

    max_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int | None = None
    logprobs: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.stop, list):
            object.__setattr__(self, "stop", tuple(self.stop))
        if not isinstance(self.max_tokens, int) or isinstance(self.max_tokens, bool) or not (
            1 <= self.max_tokens <= 32768
        ):
            raise WorkflowError(f"max_tokens must be an integer in 1..32768, got {self.max_tokens!r}")
        if not isinstance(self.temperature, int | float) or not 0.0 <= self.temperature <= 5.0:
            raise WorkflowError(f"temperature must be in 0..5, got {self.temperature!r}")
        if not isinstance(self.top_p, int | float) or not 0.0 < self.top_p <= 1.0:
            raise WorkflowError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if not isinstance(self.stop, tuple) or not all(isinstance(s, str) and s for s in self.stop):
            raise WorkflowError(f"stop must be a list of non-empty strings, got {self.stop!r}")
        if self.seed is not None and (not isinstance(self.seed, int) or isinstance(self.seed, bool)):
            raise WorkflowError(f"seed must be an integer, got {self.seed!r}")
        if not isinstance(self.logprobs, bool):
            raise WorkflowError(f"logprobs must be true or false, got {self.logprobs!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


@register_node
@dataclass(frozen=True, kw_only=True)
class Generate(Node):
    """Render `prompt`, generate, assign the text to `output` (or append a line when `append`).
    `items`: the output is a list of at most that many items, the text's non-empty lines.
    `each` (a map): one generation per item of the lists it binds, the output their list.
    `chat`: a chat turn, `prompt` its user message and `system` its optional system message,
    rendered by the engine with the model's chat template (`ir.chat`); else a plain completion."""

    kind: ClassVar[str] = "generate"
    role: ClassVar[str] = "llm"
    prompt: Template
    output: str
    append: bool = False
    sampling: Sampling = Sampling()
    items: int | None = None
    each: tuple[Binding, ...] = ()
    chat: bool = False
    system: Template | None = None

    def __post_init__(self) -> None:
        check_chat(self.id, self.chat, self.system)
        if self.items is not None and (not isinstance(self.items, int)
                                       or isinstance(self.items, bool) or not 1 <= self.items <= 64):
            raise WorkflowError(f"a list output holds 1..64 items, got {self.items!r}",
                                node=self.id, hint="bound it: `-> queries[4]` in .rag")
        if self.items is not None and (self.each or self.append):
            what = "a mapped generation" if self.each else "an appending generation"
            raise WorkflowError(f"{what} cannot also split its output into a list", node=self.id)
        if self.each and self.append:
            raise WorkflowError("a mapped generation writes a list; it cannot append",
                                node=self.id)

    def reads(self) -> frozenset[str]:
        return template_reads(self.flat_prompt, self.each) | (
            {self.output} if self.append else frozenset())

    @property
    def flat_prompt(self) -> Template:
        """The prompt as one text: a chat turn's [system][user] (`ir.chat`), else `prompt`."""
        return flat_prompt(self.prompt, self.system)

    def writes(self) -> frozenset[str]:
        return frozenset({self.output})

    def output_type(self, types: Mapping[str, str]) -> str | None:
        return "text list" if self.items or self.each else "text"


def check_chat(node: str, chat: bool, system: Template | None) -> None:
    """A system message belongs to a chat turn."""
    if not isinstance(chat, bool):
        raise WorkflowError(f"chat must be true or false, got {chat!r}", node=node)
    if system is not None and not chat:
        raise WorkflowError("a system message makes the generation a chat turn, but chat is "
                            "false", node=node, hint="drop the system message, or set chat")


@register_node
@dataclass(frozen=True, kw_only=True)
class Retrieve(Node):
    """Render `query`, search the index, assign the top-k passages to `output`. `each` (a map):
    one search per item of the lists it binds, the output the list of their top-k."""

    kind: ClassVar[str] = "retrieve"
    role: ClassVar[str] = "search"
    query: Template
    output: str
    topk: int = 5
    nprobe: int | None = None
    each: tuple[Binding, ...] = ()
    # "dense": the vector index alone; "hybrid": fused with the keyword index (BM25) by
    # reciprocal rank fusion (runtime/retrieval/options.py).
    mode: str = "dense"
    # Only passages these (field, value) conditions allow (ir/filters.py); () allows all.
    where: tuple[Condition, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.topk, int) or isinstance(self.topk, bool) or not 1 <= self.topk <= 1000:
            raise WorkflowError(f"topk must be an integer in 1..1000, got {self.topk!r}", node=self.id)
        if self.mode not in RETRIEVE_MODES:
            raise WorkflowError(f"mode must be one of {', '.join(RETRIEVE_MODES)}, got "
                                f"{self.mode!r}", node=self.id)
        wrong = check_conditions(self.where)
        if wrong is not None:
            raise WorkflowError(wrong, node=self.id)
        if self.nprobe is not None and (
            not isinstance(self.nprobe, int) or isinstance(self.nprobe, bool) or self.nprobe < 1
        ):
            raise WorkflowError(f"nprobe must be a positive integer, got {self.nprobe!r}", node=self.id)

    def reads(self) -> frozenset[str]:
        return template_reads(self.query, self.each)

    def writes(self) -> frozenset[str]:
        return frozenset({self.output})

    def output_type(self, types: Mapping[str, str]) -> str | None:
        return "passages list" if self.each else "passages"


@register_node
@dataclass(frozen=True, kw_only=True)
class Merge(Node):
    """Combine the list `input` into one value assigned to `output` (see `fanout.merge`):
    `rrf` fuses passage rankings with constant `k`, `dedup` keeps each passage once, `concat`
    chains passages or joins text items by lines; `topk` keeps the first that many passages.
    No engine work: it completes when reached."""

    kind: ClassVar[str] = "merge"
    role: ClassVar[str] = "merge"
    method: str
    input: str
    output: str
    k: int = RRF_K
    topk: int | None = None

    def __post_init__(self) -> None:
        if self.method not in MERGES:
            raise WorkflowError(f"unknown merge {self.method!r}; merges: {', '.join(MERGES)}",
                                node=self.id)
        if not isinstance(self.k, int) or isinstance(self.k, bool) or self.k < 1:
            raise WorkflowError(f"k must be a positive integer, got {self.k!r}", node=self.id)
        if self.k != RRF_K and self.method != "rrf":
            raise WorkflowError(f"k is the constant of rrf; {self.method} has none", node=self.id)
        if self.topk is not None and (not isinstance(self.topk, int)
                                      or isinstance(self.topk, bool) or not 1 <= self.topk <= 1000):
            raise WorkflowError(f"topk must be an integer in 1..1000, got {self.topk!r}",
                                node=self.id)

    def reads(self) -> frozenset[str]:
        return frozenset({self.input})

    def writes(self) -> frozenset[str]:
        return frozenset({self.output})

    def output_type(self, types: Mapping[str, str]) -> str | None:
        if self.method == "concat" and types.get(self.input) == "text list":
            return "text"
        return "passages"
