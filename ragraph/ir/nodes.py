"""Typed node payloads of a RAGraph.

The user writes Generate and Retrieve nodes between START and END. Passes add sub-stage, speculative
and prefetch nodes: each is a frozen dataclass registered with `@register_node`, so listing, JSON and
drawing handle it without special cases.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from ragraph.errors import Span, WorkflowError
from ragraph.ir.template import Template

START = "START"
END = "END"
RESERVED_IDS = frozenset({START, END})

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
    """Sampling parameters of a generation. Greedy (temperature 0) by default: reproducible."""

    max_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int | None = None
    logprobs: bool = False

    def __post_init__(self) -> None:
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


@register_node
@dataclass(frozen=True, kw_only=True)
class Generate(Node):
    """Render `prompt`, generate, assign the text to `output` (or append a line when `append`)."""

    kind: ClassVar[str] = "generate"
    role: ClassVar[str] = "llm"
    prompt: Template
    output: str
    append: bool = False
    sampling: Sampling = Sampling()

    def reads(self) -> frozenset[str]:
        return self.prompt.variables | ({self.output} if self.append else frozenset())

    def writes(self) -> frozenset[str]:
        return frozenset({self.output})


@register_node
@dataclass(frozen=True, kw_only=True)
class Retrieve(Node):
    """Render `query`, search the index, assign the top-k passages to `output`."""

    kind: ClassVar[str] = "retrieve"
    role: ClassVar[str] = "search"
    query: Template
    output: str
    topk: int = 5
    nprobe: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.topk, int) or isinstance(self.topk, bool) or not 1 <= self.topk <= 1000:
            raise WorkflowError(f"topk must be an integer in 1..1000, got {self.topk!r}", node=self.id)
        if self.nprobe is not None and (
            not isinstance(self.nprobe, int) or isinstance(self.nprobe, bool) or self.nprobe < 1
        ):
            raise WorkflowError(f"nprobe must be a positive integer, got {self.nprobe!r}", node=self.id)

    def reads(self) -> frozenset[str]:
        return self.query.variables

    def writes(self) -> frozenset[str]:
        return frozenset({self.output})
