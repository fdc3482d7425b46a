"""Edges of a RAGraph and the conditions on them.

Control edges (NEXT, COND, LOOP) define what a request does; the other kinds are added by passes to
say what MAY happen earlier (a speculative start, a prefetch) and never change the answer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from ragraph.errors import Span, WorkflowError
from ragraph.ir import expr as ex
from ragraph.ir.values import Value


class EdgeKind(StrEnum):
    NEXT = "next"  # unconditional: taken when no conditional edge of the node applies
    COND = "cond"  # taken when its condition holds (first in declaration order wins)
    LOOP = "loop"  # a back edge; conditional or not, taken at most `max_iters` times per request
    DATA = "data"  # a data dependency made explicit by rewiring
    SPECULATIVE = "speculative"  # may start dst on partial results of src
    COMMIT = "commit"  # where a speculative start is verified
    ROLLBACK = "rollback"  # where a failed speculation restarts
    PREFETCH = "prefetch"  # warms the search engine for dst

    @property
    def is_control(self) -> bool:
        return self in (EdgeKind.NEXT, EdgeKind.COND, EdgeKind.LOOP)


@dataclass(frozen=True, eq=False)
class Condition:
    """An edge condition: an expression of the safe language, or (builder only) a callable."""

    text: str | None = None
    expr: ex.Expr | None = None
    fn: Callable[[Mapping[str, Value]], bool] | None = None

    @classmethod
    def parse(cls, text: str) -> Condition:
        return cls(text=text, expr=ex.parse_expr(text))

    @classmethod
    def of(cls, when: str | Callable[[Mapping[str, Value]], bool] | Condition) -> Condition:
        if isinstance(when, Condition):
            return when
        if isinstance(when, str):
            return cls.parse(when)
        if callable(when):
            return cls(fn=when)
        raise WorkflowError(f"a condition is an expression string or a callable, got {when!r}")

    @property
    def variables(self) -> frozenset[str]:
        return ex.variables(self.expr) if self.expr is not None else frozenset()

    @property
    def source(self) -> str:
        if self.expr is not None:
            return ex.to_source(self.expr)
        name = getattr(self.fn, "__name__", "callable")
        return f"<python {name}>"

    def holds(self, state: Mapping[str, Value]) -> bool:
        if self.fn is not None:
            return bool(self.fn(state))
        assert self.expr is not None  # invariant: one of fn/expr is set by the constructors
        return ex.truthy(ex.evaluate(self.expr, state))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Condition):
            return NotImplemented
        if self.fn is not None or other.fn is not None:
            return self.fn is other.fn
        return self.expr == other.expr

    def __hash__(self) -> int:
        return hash(self.expr) if self.fn is None else id(self.fn)


@dataclass(frozen=True, kw_only=True)
class Edge:
    src: str
    dst: str
    kind: EdgeKind = EdgeKind.NEXT
    condition: Condition | None = None
    max_iters: int | None = None
    span: Span | None = field(default=None, compare=False, repr=False)
