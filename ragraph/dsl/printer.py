"""`to_rag(graph)`: a RAGraph written back as `.rag` text, so that `parse(to_rag(g)) == g`.

Integer ids from the Python builder (`add_generation(0, ...)`) print as integers, which the
language accepts as node ids, so paper-style graphs round-trip too. A graph the language cannot
express (a Python-callable condition, a node kind added by a compiler pass, an id that is not a
name) gives a WorkflowError naming what and why, never text that would parse differently.
"""

from __future__ import annotations

import dataclasses
import math
import re

from ragraph.dsl.checks import DECL_KEYWORDS, ENDPOINTS
from ragraph.dsl.strings import encode_block, encode_string
from ragraph.dsl.transformer import parser
from ragraph.errors import WorkflowError
from ragraph.ir import (
    END,
    START,
    Binding,
    Edge,
    EdgeKind,
    Generate,
    Merge,
    RAGraph,
    Retrieve,
    Sampling,
)
from ragraph.ir.fanout import RRF_K
from ragraph.ir.filters import Condition, filter_items

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_INT = re.compile(r"[0-9]+\Z")
_INDENT = "    "
_INLINE_MAX = 100  # longest header line that keeps a one-line prompt on it


def to_rag(graph: RAGraph) -> str:
    parts = [f"workflow {_name(graph.name, 'workflow name')}\n"]
    if graph.inputs:
        parts.append("".join(
            f"input {_name(i.name, 'input name')}"
            + ("" if i.default is None else f" = {_value(i.default, i.name)}") + "\n"
            for i in graph.inputs.values()
        ))
    parts.extend(_node(graph, node.id) for node in graph.nodes() if node.id not in (START, END))
    parts.append("flow:\n" + "".join(f"{_INDENT}{line}\n" for line in _flow(graph)))
    return "\n".join(parts)


def _node(graph: RAGraph, nid: str) -> str:
    node = graph.node(nid)
    if isinstance(node, Generate):
        head = f"generate {_ref(nid)}{_each(node.each)} -> {_name(node.output, 'variable')}"
        head += f"[{node.items}]" if node.items else ""
        head += " +=" if node.append else ""
        head += _options(_sampling_options(node.sampling), nid)
        if node.chat:  # the message form; `chat = true` alone would say less
            system = "" if node.system is None else _message("system", node.system.text)
            return f"{head}:\n{system}{_message('user', node.prompt.text)}"
        return head + ":" + _text(node.prompt.text, len(head) + 1) + "\n"
    if isinstance(node, Merge):
        opts = ([("k", node.k)] if node.k != RRF_K else []) + (
            [("topk", node.topk)] if node.topk else [])
        return (f"merge {_ref(nid)} -> {_name(node.output, 'variable')}{_options(opts, nid)}: "
                f"{node.method}({_name(node.input, 'variable')})\n")
    if isinstance(node, Retrieve):
        opts = ([("topk", node.topk)] + ([("nprobe", node.nprobe)] if node.nprobe else [])
                + ([("mode", node.mode)] if node.mode != "dense" else [])
                + ([("filter", _filter(node.where))] if node.where else []))
        head = (f"retrieve {_ref(nid)}{_each(node.each)} -> {_name(node.output, 'variable')}"
                f"{_options(opts, nid)}:")
        var = node.query.single_variable
        query = _name(var, "variable") if var else _text(node.query.text, 16).lstrip()
        return f"{head}\n{_INDENT}query = {query}\n"
    raise WorkflowError(
        f"node {nid!r} is a {node.kind} node, which has no .rag form", node=nid,
        hint="print the workflow before compiler passes run (.rag holds generate and retrieve)",
    )


def _each(each: tuple[Binding, ...]) -> str:
    if not each:
        return ""
    return "[" + ", ".join(f"{_name(b.item, 'item name')} in {_name(b.over, 'variable')}"
                           for b in each) + "]"


def _sampling_options(sampling: Sampling) -> list[tuple[str, object]]:
    defaults = Sampling()
    return [(f.name, getattr(sampling, f.name)) for f in dataclasses.fields(Sampling)
            if getattr(sampling, f.name) != getattr(defaults, f.name)]


def _filter(where: tuple[Condition, ...]) -> str | tuple[str, ...]:
    """One `FIELD=VALUE` item as a string, several as a list (both read back the same)."""
    items = filter_items(where)
    return items[0] if len(items) == 1 else tuple(items)


def _options(options: list[tuple[str, object]], nid: str) -> str:
    if not options:
        return ""
    return " (" + ", ".join(f"{name} = {_value(value, nid)}" for name, value in options) + ")"


def _text(text: str, head_len: int) -> str:
    """A prompt or query after its `:` — on the same line when short, else a block below."""
    if "\n" not in text and head_len + len(text) + 3 <= _INLINE_MAX:
        return " " + encode_string(text)
    block = encode_block(text, _INDENT)
    return f"\n{_INDENT}{block}" if block else " " + encode_string(text)


def _message(role: str, text: str) -> str:
    """One line of a chat turn, `role = "..."`, or a block opening on it."""
    head = f"{_INDENT}{role} ="
    if "\n" not in text and len(head) + len(text) + 3 <= _INLINE_MAX:
        return f"{head} {encode_string(text)}\n"
    block = encode_block(text, _INDENT * 2)
    return f"{head} {block or encode_string(text)}\n"


def _flow(graph: RAGraph) -> list[str]:
    """Edges as chains `a -> b -> c`; each node's out-edges keep their order (conditions are
    tried in that order), guarded edges get a line each."""
    emitted: set[int] = set()
    lines = []
    for edge in graph.edges():
        if id(edge) in emitted:
            continue
        emitted.add(id(edge))
        guard = _guard(edge)
        if guard:
            lines.append(f"{_ref(edge.src)} -> {_ref(edge.dst)}{guard}")
            continue
        chain = [edge.src, edge.dst]
        while (nxt := _next_plain(graph, chain[-1], emitted)) is not None:
            emitted.add(id(nxt))
            chain.append(nxt.dst)
        lines.append(" -> ".join(_ref(n) for n in chain))
    return lines


def _next_plain(graph: RAGraph, nid: str, emitted: set[int]) -> Edge | None:
    """The next edge of `nid` to print, when it can extend a chain (it is unguarded)."""
    pending = [e for e in graph.out_edges(nid) if id(e) not in emitted]
    if not pending or _guard(pending[0]):
        return None
    return pending[0]


def _guard(edge: Edge) -> str:
    """` if ... loop max N` for the edge (empty for a plain edge); error when .rag cannot say it."""
    where = f"edge {edge.src} -> {edge.dst}"
    if not edge.kind.is_control:
        raise WorkflowError(f"{where} is a {edge.kind.value} edge, which has no .rag form",
                            node=edge.src, hint="print the workflow before compiler passes run")
    cond = edge.condition
    if cond is not None and cond.fn is not None:
        raise WorkflowError(f"{where} has a Python callable condition, which .rag cannot express",
                            node=edge.src, hint="write the condition as an expression string")
    expected = EdgeKind.LOOP if edge.max_iters is not None else (
        EdgeKind.COND if cond is not None else EdgeKind.NEXT)
    if edge.kind != expected:
        raise WorkflowError(f"{where} is a {edge.kind.value} edge with "
                            f"{'a' if cond else 'no'} condition and "
                            f"{'a' if edge.max_iters else 'no'} bound; .rag cannot express it",
                            node=edge.src)
    text = "" if cond is None else f" if {_condition(cond.source, where)}"
    return text + ("" if edge.max_iters is None else f" loop max {edge.max_iters}")


def _condition(source: str, where: str) -> str:
    pattern = parser().get_terminal("CONDITION").pattern.to_regexp()
    if not re.fullmatch(pattern, source):
        raise WorkflowError(f"the condition of {where} cannot be written in .rag: {source}",
                            hint="`loop` is a keyword in flow lines; rename that variable")
    return source


def _ref(nid: str) -> str:
    if nid in (START, END):
        return nid.lower()
    if _INT.match(nid):
        return nid
    return _name(nid, "node id", reserved=True)


def _name(text: str, what: str, reserved: bool = False) -> str:
    taken = reserved and (text.lower() in ENDPOINTS or text in DECL_KEYWORDS)
    if not _NAME.match(text) or taken:
        raise WorkflowError(f"{what} {text!r} cannot be written in .rag",
                            hint="names are letters, digits and _ (not starting with a digit), "
                            "and not a keyword")
    return text


def _value(value: object, where: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    if isinstance(value, str):
        return encode_string(value)
    if isinstance(value, tuple | list):
        return "[" + ", ".join(_value(v, where) for v in value) + "]"
    raise WorkflowError(f"value {value!r} of {where!r} cannot be written in .rag")
