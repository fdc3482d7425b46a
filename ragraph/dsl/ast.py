"""The syntax tree of a `.rag` file: what the user wrote, with a source span on every piece.

`lower.py` turns it into a RAGraph; keeping the two apart lets every check name the exact place
(a hole inside a prompt, one option value, one arrow of a chain).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ragraph.errors import Span

Scalar = str | int | float | bool


@dataclass(frozen=True)
class Name:
    """An identifier as written (node id, variable, option name, reference)."""

    text: str
    span: Span


@dataclass(frozen=True)
class Text:
    """A decoded string literal. `positions[i]` is the (line, col) of character i of `value`, with
    one extra entry for the end, so an offset into the value maps back to the file."""

    value: str
    span: Span
    positions: tuple[tuple[int, int], ...] = field(repr=False)

    def at(self, offset: int) -> Span:
        line, col = self.positions[max(0, min(offset, len(self.positions) - 1))]
        return Span(line, col, file=self.span.file)


@dataclass(frozen=True)
class Value:
    """An option value or input default: a scalar or a list of scalars."""

    value: Scalar | tuple[Scalar, ...]
    span: Span


@dataclass(frozen=True)
class Option:
    name: Name
    value: Value


@dataclass(frozen=True)
class WorkflowDecl:
    name: Name


@dataclass(frozen=True)
class InputDecl:
    name: Name
    default: Value | None


@dataclass(frozen=True)
class Binding:
    """`item in over` inside a map's brackets."""

    item: Name
    over: Name


@dataclass(frozen=True)
class Bound:
    """`[N]` after a list output; `value` None when the brackets are empty (an error)."""

    span: Span
    value: Value | None


@dataclass(frozen=True)
class ChatBody:
    """The message form of a generation: `system = ...` (optional) and `user = ...`."""

    user_keyword: Span
    user: Text
    system: Text | None = None


@dataclass(frozen=True)
class GenerateDecl:
    """`prompt` is the plain body, or the user message of the message form (`chat` set)."""

    id: Name
    output: Name
    append: bool
    options: tuple[Option, ...]
    prompt: Text
    each: tuple[Binding, ...] = ()
    bound: Bound | None = None
    chat: ChatBody | None = None


@dataclass(frozen=True)
class RetrieveDecl:
    id: Name
    output: Name
    options: tuple[Option, ...]
    query: Text | Name
    each: tuple[Binding, ...] = ()


@dataclass(frozen=True)
class MergeDecl:
    """`merge id -> output (options): method(input)`."""

    id: Name
    output: Name
    options: tuple[Option, ...]
    method: Name
    input: Name


@dataclass(frozen=True)
class Guard:
    """What follows the last arrow: `if CONDITION`, `loop max N`, or both. `loop` without a
    bound is kept (bound None) so lowering can say what is missing."""

    condition: Text | None = None
    loop: Span | None = None
    bound: Value | None = None


@dataclass(frozen=True)
class FlowLine:
    refs: tuple[Name, ...]
    arrows: tuple[Span, ...]  # arrows[i] sits between refs[i] and refs[i + 1]
    guard: Guard | None


@dataclass(frozen=True)
class FlowDecl:
    keyword: Span
    lines: tuple[FlowLine, ...]


Decl = WorkflowDecl | InputDecl | GenerateDecl | RetrieveDecl | MergeDecl | FlowDecl
NodeDecl = GenerateDecl | RetrieveDecl | MergeDecl


@dataclass(frozen=True)
class Module:
    decls: tuple[Decl, ...]
    file: str | None = None
