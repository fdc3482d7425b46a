"""Name checks that need the whole file: reserved ids, undefined variables, unknown references.

They run before the IR verifier so that each error points at the exact hole, variable or
reference rather than at the node that holds it.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from ragraph.dsl import ast
from ragraph.errors import Span, WorkflowError
from ragraph.ir import END, START
from ragraph.ir import expr as ex
from ragraph.ir.template import Template

# Words that start a declaration: a node with such an id could not begin a flow line.
DECL_KEYWORDS = frozenset({"workflow", "input", "generate", "retrieve", "merge", "flow"})
ENDPOINTS = {"start": START, "end": END}


def check_node_id(name: ast.Name) -> None:
    if name.text.lower() in ENDPOINTS or name.text in (START, END):
        raise WorkflowError(
            f"{name.text!r} is reserved and cannot name a node",
            span=name.span, hint="`start` and `end` are the entry and exit of every workflow",
        )
    if name.text in DECL_KEYWORDS:
        raise WorkflowError(f"{name.text!r} is a keyword and cannot name a node", span=name.span)


def hole_spans(template: Template, where: ast.Text | ast.Name) -> list[tuple[str, Span]]:
    """Each `{hole}` of a template with where it is written."""
    return [(hole.name, where.at(hole.offset + 1) if isinstance(where, ast.Text) else where.span)
            for hole in template.holes]


def var_spans(expr: ex.Expr, text: ast.Text) -> list[tuple[str, Span]]:
    """Each variable of a condition with where it is written."""
    return [(var.name, text.at(var.offset)) for var in ex.var_offsets(expr)]


def check_defined(names: list[tuple[str, Span]], defined: set[str]) -> None:
    """Every name is a variable some input or node defines."""
    for name, span in names:
        if name not in defined:
            raise undefined(name, span, defined)


def undefined(name: str, span: Span, defined: Iterable[str]) -> WorkflowError:
    return WorkflowError(
        f"undefined variable {name!r}", span=span,
        hint=suggest(name, defined, "inputs and node outputs"),
    )


def resolve_ref(ref: ast.Name, node_ids: dict[str, Span]) -> str:
    """The node id a flow reference names (`start`/`end` are the endpoints)."""
    if ref.text in ENDPOINTS:
        return ENDPOINTS[ref.text]
    if ref.text in node_ids or ref.text in (START, END):
        return ref.text
    raise WorkflowError(
        f"unknown node {ref.text!r}", span=ref.span,
        hint=suggest(ref.text, [*node_ids, "start", "end"], "nodes"),
    )


def suggest(name: str, known: Iterable[str], what: str) -> str:
    """A did-you-mean hint, or the list of what is known when nothing is close."""
    names = sorted(set(known))
    close = difflib.get_close_matches(name, names, n=1)
    if close:
        return f"did you mean {close[0]!r}?"
    return f"{what}: {', '.join(names)}" if names else f"there are no {what}"
