"""The invariants of a RAGraph. `verify(graph)` raises a WorkflowError that names the node at fault
(and its source location when the graph came from a `.rag` file)."""

from __future__ import annotations

from collections.abc import Iterable

import networkx as nx

from ragraph.errors import Span, WorkflowError
from ragraph.ir.edges import Edge, EdgeKind
from ragraph.ir.graph import RAGraph
from ragraph.ir.nodes import END, START, Generate, Merge, Node, Retrieve
from ragraph.ir.values import Passages


def verify(graph: RAGraph) -> None:
    from ragraph.ir.verify_fanout import check_fanout

    if all(node.id in (START, END) for node in graph.nodes()):
        # START -> END answers nothing, and an executor waiting for an answer would wait forever.
        raise fail(graph, "the workflow has no nodes", hint="add a generation that writes "
                   "`answer` (builder: add_generation(...), then edges from START and to END)")
    _check_edges(graph)
    _check_reachability(graph)
    _check_loops(graph)
    _check_types(graph)
    check_fanout(graph, variable_types(graph))
    _check_definitions(graph)
    for node in graph.nodes():
        node.check(graph)


def fail(graph: RAGraph, message: str, node: Node | None = None, span: Span | None = None,
         hint: str | None = None) -> WorkflowError:
    """A verification error; without a source location it carries the listing for context."""
    where = span or (node.span if node else None)
    context = None if where else str(graph)
    return WorkflowError(message, span=where, node=node.id if node else None, hint=hint,
                         context=context)


def _check_edges(graph: RAGraph) -> None:
    for node in graph.nodes():
        if not node.in_control_flow:
            if graph.out_edges(node.id, control_only=True) or graph.in_edges(node.id, True):
                raise fail(graph, f"side node {node.id!r} cannot be on a control edge", node)
            continue
        if node.id == END:
            if graph.out_edges(END, control_only=True):
                raise fail(graph, "END cannot have outgoing edges", node)
            continue
        control = graph.out_edges(node.id, control_only=True)
        nexts = [e for e in control if e.kind == EdgeKind.NEXT]
        if not nexts:
            label = "START" if node.id == START else f"node {node.id!r}"
            raise fail(
                graph, f"{label} has no unconditional next edge", node,
                hint="add a plain edge for when no condition holds (e.g. `-> end`)",
            )
        if len(nexts) > 1:
            raise fail(
                graph, f"node {node.id!r} has {len(nexts)} unconditional next edges "
                f"(to {', '.join(e.dst for e in nexts)}); at most one", node, nexts[1].span,
                hint="make all but one conditional",
            )
        for edge in control:
            _check_edge(graph, edge, node)


def _check_edge(graph: RAGraph, edge: Edge, node: Node) -> None:
    if edge.dst == START:
        raise fail(graph, "edges cannot lead into START", node, edge.span)
    if edge.kind == EdgeKind.COND and edge.condition is None:
        raise fail(graph, f"conditional edge {edge.src} -> {edge.dst} has no condition", node, edge.span)
    if edge.kind == EdgeKind.LOOP and edge.max_iters is None:
        raise fail(graph, f"loop {edge.src} -> {edge.dst} has no iteration bound", node, edge.span,
                   hint="bound it: `loop max 3` in .rag, `max_iters=3` in Python")


def _check_reachability(graph: RAGraph) -> None:
    control = graph.control_graph()
    reachable = nx.descendants(control, START) | {START}
    reaches_end = nx.ancestors(control, END) | {END}
    for node in graph.nodes():
        if not node.in_control_flow:
            continue
        if node.id not in reachable:
            raise fail(graph, f"node {node.id!r} is unreachable from start", node)
        if node.id not in reaches_end:
            raise fail(graph, f"node {node.id!r} can never reach end", node)


def _check_loops(graph: RAGraph) -> None:
    acyclic = nx.DiGraph()
    acyclic.add_nodes_from(n.id for n in graph.nodes())
    acyclic.add_edges_from(
        (e.src, e.dst) for e in graph.edges() if e.kind in (EdgeKind.NEXT, EdgeKind.COND)
    )
    try:
        cycle = nx.find_cycle(acyclic)
    except nx.NetworkXNoCycle:
        return
    src, dst = cycle[-1][0], cycle[-1][1]
    bad = next(e for e in graph.out_edges(src, control_only=True) if e.dst == dst)
    raise fail(
        graph, f"loop {src} -> {dst} has no iteration bound "
        f"(cycle {' -> '.join([c[0] for c in cycle] + [dst])})", graph.node(src), bad.span,
        hint="bound the back edge: `loop max 3` in .rag, `max_iters=3` in Python",
    )


def variable_types(graph: RAGraph) -> dict[str, str]:
    """'text', 'number', 'bool', 'passages', 'text list' or 'passages list' for every variable;
    conflicting writes are errors."""
    types: dict[str, str] = {}
    for inp in graph.inputs.values():
        types[inp.name] = _value_type(inp.default)
    # A merge's type follows its input's, which any other node may write: merges go last.
    for node in sorted(graph.nodes(), key=lambda n: isinstance(n, Merge)):
        kind = node.output_type(types)
        if kind is None:
            continue
        (name,) = node.writes()
        if types.get(name, kind) != kind:
            raise fail(graph, f"node {node.id!r} assigns {kind} to {name!r}, "
                       f"which elsewhere holds {types[name]}", node)
        types[name] = kind
    return types


def _value_type(value: object) -> str:
    if value is None or isinstance(value, str):
        return "text"
    if isinstance(value, bool):
        return "bool"
    return "passages" if isinstance(value, Passages) else "number"


def _check_types(graph: RAGraph) -> None:
    types = variable_types(graph)
    for node in graph.nodes():
        if isinstance(node, Retrieve):
            bad = sorted(v for v in node.query.variables if types.get(v) == "passages")
            if bad:
                raise fail(graph, f"retrieval {node.id!r} queries with {bad[0]!r}, which holds "
                           "passages, not text", node, hint="query with a text variable or template")
        if isinstance(node, Generate) and node.append and node.output in graph.inputs:
            if types[node.output] != "text":
                raise fail(graph, f"node {node.id!r} appends to non-text input {node.output!r}", node)


def _check_definitions(graph: RAGraph) -> None:
    """Every variable read must be assigned on every path from START (must-defined dataflow)."""
    defined_anywhere = set(graph.inputs) | {v for n in graph.nodes() for v in n.writes()}
    available = _must_defined(graph)
    for node in graph.nodes():
        if not node.in_control_flow:
            continue
        needed = node.reads() - (node.writes() if getattr(node, "append", False) else frozenset())
        for var in sorted(needed):
            if var not in defined_anywhere:
                raise fail(graph, f"undefined variable {var!r} in node {node.id!r}", node,
                           hint=_item_hint(graph, var) or _suggest(var, defined_anywhere))
            if var not in available[node.id][0]:
                raise fail(graph, f"variable {var!r} may be unset when node {node.id!r} runs "
                           "(no assignment on some path from start)", node)
        for edge in graph.out_edges(node.id, control_only=True):
            if edge.condition is None:
                continue
            for var in sorted(edge.condition.variables):
                if var not in defined_anywhere:
                    raise fail(graph, f"undefined variable {var!r} in the condition of "
                               f"{edge.src} -> {edge.dst}", node, edge.span,
                               hint=_item_hint(graph, var) or _suggest(var, defined_anywhere))
                if var not in available[node.id][1]:
                    raise fail(graph, f"variable {var!r} may be unset when the condition of "
                               f"{edge.src} -> {edge.dst} is evaluated", node, edge.span)


def _must_defined(graph: RAGraph) -> dict[str, tuple[frozenset[str], frozenset[str]]]:
    everything = frozenset(graph.inputs) | frozenset(v for n in graph.nodes() for v in n.writes())
    ins = {n.id: everything for n in graph.nodes()}
    ins[START] = frozenset(graph.inputs)
    outs = {n.id: ins[n.id] | graph.node(n.id).writes() for n in graph.nodes()}
    nodes = list(graph.nodes())
    preds_of = {n.id: [e.src for e in graph.in_edges(n.id, control_only=True)] for n in nodes}
    changed = True
    while changed:
        changed = False
        for node in nodes:
            preds = preds_of[node.id]
            new_in = frozenset(graph.inputs) if node.id == START else (
                frozenset.intersection(*(outs[p] for p in preds)) if preds else everything
            )
            new_out = new_in | node.writes()
            if new_in != ins[node.id] or new_out != outs[node.id]:
                ins[node.id], outs[node.id], changed = new_in, new_out, True
    return {nid: (ins[nid], outs[nid]) for nid in ins}


def _item_hint(graph: RAGraph, name: str) -> str | None:
    for node in graph.nodes():
        if any(b.item == name for b in getattr(node, "each", ())):
            return f"{name!r} is the item of map {node.id!r}; it exists only inside that step"
    return None


def _suggest(name: str, known: Iterable[str]) -> str | None:
    import difflib

    close = difflib.get_close_matches(name, sorted(known), n=1)
    return f"did you mean {close[0]!r}?" if close else None
