"""The canonical text listing of a RAGraph (`str(graph)`): deterministic, for tests and `compile`.

Nodes appear in depth-first order from START following out-edges in declaration order, then any
unreachable nodes in insertion order; each node is followed by its out-edges.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from ragraph.ir.edges import Edge, EdgeKind
from ragraph.ir.graph import RAGraph
from ragraph.ir.nodes import START, Node
from ragraph.ir.template import Template


def node_order(graph: RAGraph) -> list[str]:
    order: list[str] = []
    seen: set[str] = set()
    stack = [START]
    while stack:
        nid = stack.pop()
        if nid in seen:
            continue
        seen.add(nid)
        order.append(nid)
        stack.extend(reversed([e.dst for e in graph.out_edges(nid) if e.dst not in seen]))
    order.extend(n.id for n in graph.nodes() if n.id not in seen)
    return order


def listing(graph: RAGraph) -> str:
    lines = [f"workflow {graph.name}"]
    for inp in graph.inputs.values():
        lines.append(f"input {inp.name}" + ("" if inp.default is None else f" = {fmt(inp.default)}"))
    for nid in node_order(graph):
        node = graph.node(nid)
        fields = " ".join(f"{k}={v}" for k, v in node_fields(node))
        lines.append(f"node {nid}: {node.kind}" + (f" {fields}" if fields else ""))
        lines.extend(f"  {edge_text(e)}" for e in graph.out_edges(nid))
    return "\n".join(lines) + "\n"


def node_fields(node: Node) -> list[tuple[str, str]]:
    """The node's non-default fields as (name, canonical text), in declaration order."""
    return list(_fields(node, skip=("id", "span")))


def _fields(obj: Any, skip: tuple[str, ...] = ()) -> Any:
    for f in dataclasses.fields(obj):
        if f.name in skip or not f.repr and f.name != "span":
            continue
        value = getattr(obj, f.name)
        if _is_default(f, value):
            continue
        if dataclasses.is_dataclass(value) and not isinstance(value, Template):
            yield from _fields(value)
        else:
            yield f.name, fmt(value)


def _is_default(f: dataclasses.Field, value: Any) -> bool:
    if f.default is not dataclasses.MISSING:
        return value == f.default
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return value == f.default_factory()  # type: ignore[misc]
    return False


def fmt(value: Any) -> str:
    if isinstance(value, Template):
        return json.dumps(value.text, ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple | list):
        return "[" + ", ".join(fmt(v) for v in value) + "]"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def edge_text(edge: Edge) -> str:
    text = f"{edge.kind.value} -> {edge.dst}"
    if edge.max_iters is not None:
        text += f" max={edge.max_iters}"
    if edge.condition is not None:
        text += f" if {edge.condition.source}"
    return text


CONTROL_KINDS = frozenset(k for k in EdgeKind if k.is_control)
