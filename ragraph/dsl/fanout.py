"""Fan-out checks that point into the file: list bounds, map bindings, item names and whole lists.

They run before the IR verifier (which checks the same rules for Python-built graphs) so each
error names the bracket, binding, hole or condition variable at fault, not just the node.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ragraph.dsl import ast
from ragraph.dsl.checks import suggest, undefined
from ragraph.errors import Span, WorkflowError
from ragraph.ir.fanout import MERGES
from ragraph.ir.verify_fanout import LIST_HINT

MAX_ITEMS = 64  # the IR's bound on a list output (nodes.Generate)


@dataclass(frozen=True)
class Scope:
    """What the file defines: variables (inputs and node outputs), which of them are lists, and
    each map's item names with the map that binds them."""

    defined: frozenset[str]
    lists: frozenset[str]
    items: dict[str, ast.Name]  # item name -> the id of a map binding it

    @classmethod
    def of(cls, inputs: Iterable[str], nodes: list[ast.NodeDecl]) -> Scope:
        lists = {d.output.text for d in nodes if getattr(d, "bound", None) is not None
                 or getattr(d, "each", ())}
        items = {b.item.text: d.id for d in nodes for b in getattr(d, "each", ())}
        return cls(frozenset(inputs) | {d.output.text for d in nodes}, frozenset(lists), items)


def bound_of(decl: ast.GenerateDecl) -> int | None:
    """The item count of a list output (`-> queries[4]`), None for a plain output."""
    bound = decl.bound
    if bound is None:
        return None
    if bound.value is None:
        raise WorkflowError("a list output needs a bound on its item count", span=bound.span,
                            hint=f"write `{decl.output.text}[4]` for at most 4 items")
    if not 1 <= bound.value.value <= MAX_ITEMS:  # type: ignore[operator]
        raise WorkflowError(f"a list holds 1..{MAX_ITEMS} items, got {bound.value.value}",
                            span=bound.value.span)
    return bound.value.value  # type: ignore[return-value]


def check_bindings(decl: ast.GenerateDecl | ast.RetrieveDecl, scope: Scope) -> None:
    seen: set[str] = set()
    for b in decl.each:
        if b.item.text in seen:
            raise WorkflowError(f"{b.item.text!r} is bound twice in this map", span=b.item.span)
        seen.add(b.item.text)
        if b.item.text in scope.defined:
            raise WorkflowError(f"item name {b.item.text!r} shadows the variable "
                                f"{b.item.text!r}", span=b.item.span,
                                hint="give the item a name of its own")
        check_list(b.over, scope, "map over")
    if isinstance(decl, ast.GenerateDecl) and decl.each and decl.bound is not None:
        raise WorkflowError("a map writes one item per branch; its output takes no bound",
                            span=decl.bound.span, hint=f"write `-> {decl.output.text}`")
    if isinstance(decl, ast.GenerateDecl) and decl.append and (decl.each or decl.bound):
        raise WorkflowError("a list output cannot be appended to (`+=`)", span=decl.output.span)


def check_list(name: ast.Name, scope: Scope, verb: str) -> None:
    """`name` is a list variable (what a map or a merge reads)."""
    if name.text not in scope.defined:
        raise undefined(name.text, name.span, scope.defined)
    if name.text not in scope.lists:
        raise WorkflowError(f"cannot {verb} {name.text!r}: it is not a list", span=name.span,
                            hint=LIST_HINT)


def check_merge(decl: ast.MergeDecl, scope: Scope) -> str:
    """The merge's method, checked, and its input, checked to be a list."""
    method = decl.method.text
    if method not in MERGES:
        raise WorkflowError(f"unknown merge {method!r}", span=decl.method.span,
                            hint=suggest(method, MERGES, "merges"))
    check_list(decl.input, scope, "merge")
    return method


def check_names(names: Iterable[tuple[str, Span]], scope: Scope,
                own: frozenset[str] = frozenset()) -> None:
    """Names read by a template or condition: an item only inside its own map (`own`), a list
    never whole."""
    for name, span in names:
        if name in own:
            continue
        if name in scope.items:
            where = scope.items[name]
            raise WorkflowError(f"{name!r} is the item of map {where.text!r} (line "
                                f"{where.span.line}); it exists only inside that step", span=span)
        if name in scope.lists:
            raise WorkflowError(f"{name!r} is a list; a step reads it whole only through a "
                                "merge", span=span, hint=f"map over it (`[x in {name}]`) or "
                                "merge it first: rrf, dedup or concat")
