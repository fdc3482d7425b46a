"""JSON serialization of a RAGraph that round-trips: `from_json(to_json(g)) == g`.

Node payloads are encoded field by field from their dataclass definitions, so node kinds added by
passes serialize without code here. Python-callable conditions cannot be serialized.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from typing import Any

from ragraph.errors import WorkflowError
from ragraph.ir.edges import Condition, Edge, EdgeKind
from ragraph.ir.graph import RAGraph
from ragraph.ir.listing import node_order
from ragraph.ir.nodes import END, NODE_TYPES, START, Node
from ragraph.ir.template import Template
from ragraph.ir.values import Passage, Passages

FORMAT = "ragraph/1"


def to_dict(graph: RAGraph) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "name": graph.name,
        "inputs": [{"name": i.name, "default": _encode(i.default)} for i in graph.inputs.values()],
        "nodes": [_node_dict(graph.node(nid)) for nid in node_order(graph)
                  if nid not in (START, END)],
        "edges": [_edge_dict(e) for e in graph.edges()],
    }


def to_json(graph: RAGraph, indent: int | None = 2) -> str:
    return json.dumps(to_dict(graph), indent=indent, ensure_ascii=False)


def from_json(text: str) -> RAGraph:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise WorkflowError(f"not a ragraph JSON document: {err}") from err
    return from_dict(data)


def from_dict(data: dict[str, Any]) -> RAGraph:
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise WorkflowError(f"not a ragraph JSON document (expected format {FORMAT!r})")
    graph = RAGraph(data["name"])
    for inp in data["inputs"]:
        graph.add_input(inp["name"], _decode(inp["default"]))
    for raw in data["nodes"]:
        graph.add_node(_node_from(raw))
    for raw in data["edges"]:
        cond = raw.get("condition")
        graph.insert_edge(Edge(
            src=raw["src"], dst=raw["dst"], kind=EdgeKind(raw["kind"]),
            condition=None if cond is None else Condition.parse(cond),
            max_iters=raw.get("max_iters"),
        ))
    return graph


def _node_dict(node: Node) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": node.kind}
    for f in dataclasses.fields(node):
        if f.name != "span":
            out[f.name] = _encode(getattr(node, f.name))
    return out


def _node_from(raw: dict[str, Any]) -> Node:
    kind = raw.get("kind")
    if kind not in NODE_TYPES:
        raise WorkflowError(f"unknown node kind {kind!r} in JSON")
    cls = NODE_TYPES[kind]
    hints = typing.get_type_hints(cls)
    fields = {f.name: _decode(raw[f.name], hints[f.name]) for f in dataclasses.fields(cls)
              if f.name in raw}
    return cls(**fields)


def _edge_dict(edge: Edge) -> dict[str, Any]:
    if edge.condition is not None and edge.condition.fn is not None:
        raise WorkflowError(
            f"edge {edge.src} -> {edge.dst} has a Python callable condition, which cannot be "
            "serialized", node=edge.src, hint="use an expression string condition instead",
        )
    out: dict[str, Any] = {"src": edge.src, "dst": edge.dst, "kind": edge.kind.value}
    if edge.condition is not None:
        out["condition"] = edge.condition.source
    if edge.max_iters is not None:
        out["max_iters"] = edge.max_iters
    return out


def _encode(value: Any) -> Any:
    if isinstance(value, Template):
        return {"template": value.text}
    if isinstance(value, Passages):
        return {"passages": [dataclasses.asdict(p) for p in value.items]}
    if dataclasses.is_dataclass(value):
        return {f.name: _encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple):
        return [_encode(v) for v in value]
    return value


def _decode(value: Any, hint: Any = None) -> Any:
    if isinstance(value, dict) and "template" in value:
        return Template.parse(value["template"])
    if isinstance(value, dict) and "passages" in value:
        return Passages(tuple(Passage(**p) for p in value["passages"]))
    if isinstance(hint, type) and dataclasses.is_dataclass(hint) and isinstance(value, dict):
        sub = typing.get_type_hints(hint)
        return hint(**{k: _decode(v, sub.get(k)) for k, v in value.items()})
    if isinstance(value, list):
        args = typing.get_args(hint) if typing.get_origin(hint) is tuple else ()
        return tuple(_decode(v, args[0] if args else None) for v in value)
    return value
