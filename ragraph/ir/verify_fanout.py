"""The invariants of fan-out: maps bind lists, lists are read only by maps and merges, zipped
lists have the same length, and merges combine lists of the right kind.

A list is bounded where it is made (a list output's item count), and a map's output has the
length of the lists it maps over; `list_sources` traces each list back to the list output it
was split from, which is what zipping needs (same source, same length) and what drawings show
as a map's multiplicity.
"""

from __future__ import annotations

from dataclasses import dataclass

from ragraph.ir.graph import RAGraph
from ragraph.ir.nodes import Merge, Node
from ragraph.ir.verify import fail

LIST_HINT = "a list is made by a generation with a bounded list output (`-> queries[4]`) or by a map"


@dataclass(frozen=True)
class ListSource:
    """Where a list variable's items come from: the list output `root` (a node id) it was split
    from, at most `bound` items."""

    root: str
    bound: int


def list_sources(graph: RAGraph) -> dict[str, ListSource]:
    """Each list variable of the workflow as written (a map inherits its lists' source)."""
    found: dict[str, ListSource] = {}
    for _ in range(len(list(graph.nodes())) + 1):  # maps may be declared before their lists
        before = dict(found)
        for node in graph.nodes():
            items, each = getattr(node, "items", None), getattr(node, "each", ())
            output = getattr(node, "output", None)
            if items and output:
                found[output] = ListSource(node.id, items)
            elif each and output and each[0].over in found:
                found[output] = found[each[0].over]
        if found == before:
            break
    return found


def check_fanout(graph: RAGraph, types: dict[str, str]) -> None:
    for node in graph.nodes():
        each = getattr(node, "each", ())
        if each:
            _check_bindings(graph, node, types)
        allowed = {b.over for b in each} | ({node.input} if isinstance(node, Merge) else set())
        for var in sorted(node.reads() - allowed):
            if types.get(var, "").endswith(" list"):
                raise _whole_list(graph, node, var, f"node {node.id!r} reads")
        if isinstance(node, Merge):
            _check_merge(graph, node, types)
        for edge in graph.out_edges(node.id, control_only=True):
            for var in sorted(edge.condition.variables if edge.condition else ()):
                if types.get(var, "").endswith(" list"):
                    raise _whole_list(graph, node, var,
                                      f"the condition of {edge.src} -> {edge.dst} reads",
                                      edge.span)
    _check_zips(graph)


def _whole_list(graph: RAGraph, node: Node, var: str, where: str, span=None):  # noqa: ANN001
    return fail(graph, f"{where} the list {var!r} as a whole", node, span,
                hint=f"map over it (`[x in {var}]`) or merge it first (rrf, dedup or concat)")


def _check_bindings(graph: RAGraph, node: Node, types: dict[str, str]) -> None:
    defined = set(graph.inputs) | {v for n in graph.nodes() for v in n.writes()}
    seen: set[str] = set()
    for b in node.each:  # type: ignore[attr-defined]
        if b.item in seen:
            raise fail(graph, f"map {node.id!r} binds {b.item!r} twice", node)
        seen.add(b.item)
        if b.item in defined:
            raise fail(graph, f"item name {b.item!r} of map {node.id!r} shadows the variable "
                       f"{b.item!r}", node, hint="give the item a name of its own")
        kind = types.get(b.over)
        if kind is not None and not kind.endswith(" list"):
            raise fail(graph, f"map {node.id!r} maps over {b.over!r}, which holds {kind}, "
                       "not a list", node, hint=LIST_HINT)
        query = getattr(node, "query", None)
        if query is not None and kind == "passages list" and b.item in query.variables:
            raise fail(graph, f"retrieval {node.id!r} queries with {b.item!r}, which holds "
                       "passages, not text", node, hint="query with a text item")


def _check_merge(graph: RAGraph, node: Merge, types: dict[str, str]) -> None:
    kind = types.get(node.input)
    if kind is None:
        return  # undefined: the definitions check names it
    if not kind.endswith(" list"):
        raise fail(graph, f"merge {node.id!r} combines {node.input!r}, which holds {kind}, "
                   "not a list", node, hint=LIST_HINT)
    if node.method != "concat" and kind != "passages list":
        raise fail(graph, f"{node.method} merges passages; {node.input!r} is a {kind}", node,
                   hint="concat joins text items, one a line")
    if node.topk is not None and kind != "passages list":
        raise fail(graph, f"merge {node.id!r}: topk keeps passages; {node.input!r} is a {kind}",
                   node)


def _check_zips(graph: RAGraph) -> None:
    sources = list_sources(graph)
    for node in graph.nodes():
        each = getattr(node, "each", ())
        roots = {b.over: sources[b.over].root for b in each if b.over in sources}
        if len(set(roots.values())) > 1:
            shown = ", ".join(f"{var!r} from {root!r}" for var, root in roots.items())
            raise fail(graph, f"map {node.id!r} zips lists that may differ in length ({shown})",
                       node, hint="zip only lists mapped from the same list output")
