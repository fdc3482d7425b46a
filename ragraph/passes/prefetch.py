"""prefetch: lookahead cluster prefetch (TeleRAG). For each generation whose output feeds a later
retrieval's query, a side Prefetch node starts with the generation and loads the clusters nearest
to the text already known (the question, and in loops the previous query) onto the accelerator,
so the retrieval's search steps find them resident. PREFETCH edges: generation's first step ->
prefetch -> the retrieval's search step. It never changes results, only where clusters are
searched."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ragraph.ir.edges import Edge, EdgeKind
from ragraph.ir.fanout import Binding
from ragraph.ir.graph import RAGraph
from ragraph.ir.nodes import Generate, Node, Retrieve
from ragraph.ir.overlap import Prefetch
from ragraph.ir.template import Template
from ragraph.passes.analysis import on_cycle, origin_of, passage_vars, step
from ragraph.passes.base import Pass, PassContext
from ragraph.passes.rewrite import fresh_id


@dataclass(frozen=True)
class Generation:
    """A generation as prefetch sees it, split or not."""

    origin: str
    first: str  # the node that starts it (prefill, or the Generate node)
    last: str  # the node that assigns its output
    prompt: Template
    output: str
    each: tuple[Binding, ...] = ()


def generations(graph: RAGraph) -> list[Generation]:
    found = []
    for node in graph.nodes():
        if isinstance(node, Generate):
            found.append(Generation(node.id, node.id, node.id, node.flat_prompt, node.output,
                                    node.each))
        elif node.kind == "prefill":
            finish = step(graph, node.origin, "finish")  # type: ignore[attr-defined]
            if finish is not None:
                found.append(Generation(node.origin, node.id, finish.id,  # type: ignore[attr-defined]
                                        node.flat_prompt, finish.output, node.each))  # type: ignore[attr-defined]
    return found


def query_readers(graph: RAGraph, gen: Generation) -> list[Node]:
    """Retrieval heads (Retrieve or embed-query) whose query reads gen's output, reachable from
    gen without passing another assignment of that output (those queries depend on gen)."""
    found: list[Node] = []
    seen: set[str] = set()
    frontier = [e.dst for e in graph.out_edges(gen.last, control_only=True)]
    while frontier:
        nid = frontier.pop(0)
        if nid in seen:
            continue
        seen.add(nid)
        node = graph.node(nid)
        # reads(), not the query's holes: a map's query reads the list through its item.
        if isinstance(node, Retrieve) or node.kind == "embed-query":
            if gen.output in node.reads():
                found.append(node)
        if gen.output in node.writes():
            continue
        frontier.extend(e.dst for e in graph.out_edges(nid, control_only=True))
    return found


@dataclass(frozen=True)
class PrefetchPass(Pass):
    name: ClassVar[str] = "prefetch"
    summary: ClassVar[str] = "lookahead cluster prefetch while query-producing generations run"

    def apply(self, graph: RAGraph, ctx: PassContext) -> bool:
        done = {(n.source, n.target) for n in graph.nodes() if isinstance(n, Prefetch)}
        passages = passage_vars(graph)
        changed = False
        for gen in generations(graph):
            readers = query_readers(graph, gen)
            for head in readers:
                target = origin_of(head)
                if (gen.origin, target) in done:
                    continue
                loop = on_cycle(graph, head.id)
                known = _known(gen, head, passages, loop)
                if not known:
                    continue
                suffix = "" if len(readers) == 1 else f".{target}"
                node = Prefetch(id=fresh_id(graph, self.name, f"{gen.origin}.prefetch{suffix}"),
                                source=gen.origin, target=target, known=known, incremental=loop,
                                span=head.span)
                warm = step(graph, target, "search-steps") or head
                graph.add_node(node)
                graph.insert_edge(Edge(src=gen.first, dst=node.id, kind=EdgeKind.PREFETCH))
                graph.insert_edge(Edge(src=node.id, dst=warm.id, kind=EdgeKind.PREFETCH))
                changed = True
        return changed


def _known(gen: Generation, head: Node, passages: frozenset[str], loop: bool) -> tuple[str, ...]:
    """Text variables that may be set when gen starts: the query's other variables and gen's
    prompt variables; in a loop also gen's own output (the previous round's query)."""
    query: Template = head.query
    names = [h.name for h in query.holes] + [h.name for h in gen.prompt.holes]
    items = {b.item for b in (*getattr(head, "each", ()), *gen.each)}  # unset until the map runs
    keep = [n for n in dict.fromkeys(names)
            if n not in passages and n not in items and (loop or n != gen.output)]
    return tuple(keep)
