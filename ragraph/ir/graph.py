"""RAGraph: the workflow graph shared by the builder, the `.rag` parser, the passes and the runtime.

networkx holds the structure; typed node and edge dataclasses hold the meaning. Nothing outside this
package touches the networkx object.

Control semantics (what every executor implements, see `control.choose_edge`): a request starts at
START with its inputs as variables; a node runs, then the first of its conditional out-edges (in
declaration order) whose condition holds is taken, LOOP edges only while taken fewer than
`max_iters` times; otherwise its NEXT edge. The request ends at END.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from ragraph.errors import Span, WorkflowError
from ragraph.ir.edges import Condition, Edge, EdgeKind
from ragraph.ir.fanout import RRF_K, Binding, bindings
from ragraph.ir.nodes import (
    END,
    RESERVED_IDS,
    START,
    End,
    Generate,
    Merge,
    Node,
    Retrieve,
    Sampling,
    Start,
)
from ragraph.ir.template import Template, TemplateError
from ragraph.ir.values import Value

NodeRef = str | int


@dataclass(frozen=True)
class Input:
    """A named request input; `default` None means the request must supply it."""

    name: str
    default: Value | None = None
    span: Span | None = field(default=None, compare=False, repr=False)


def node_id(ref: NodeRef) -> str:
    if isinstance(ref, bool) or not isinstance(ref, str | int):
        raise WorkflowError(f"a node id is a name or an integer, got {ref!r}")
    return str(ref)


class RAGraph:
    """A mutable workflow graph. `freeze()` makes it read-only (what `compile()` hands the runtime)."""

    def __init__(self, name: str = "workflow") -> None:
        self.name = name
        self.inputs: dict[str, Input] = {}
        self._g = nx.MultiDiGraph()
        self._edge_seq = 0
        self._frozen = False
        self.add_node(Start(id=START))
        self.add_node(End(id=END))

    # ----- building ------------------------------------------------------------------------------

    def add_input(self, name: str, default: Value | None = None, span: Span | None = None) -> None:
        self._mutable()
        if name in self.inputs:
            raise WorkflowError(f"input {name!r} is declared twice", span=span)
        self.inputs[name] = Input(name, default, span)

    def add_node(self, node: Node) -> Node:
        self._mutable()
        if node.id in self._g:
            raise WorkflowError(f"duplicate node id {node.id!r}", span=node.span, node=node.id)
        self._g.add_node(node.id, node=node)
        return node

    def replace_node(self, node: Node) -> None:
        """Swap the payload of an existing node (passes use this)."""
        self._mutable()
        if node.id not in self._g:
            raise WorkflowError(f"no node {node.id!r} to replace", node=node.id)
        self._g.nodes[node.id]["node"] = node

    def remove_node(self, ref: NodeRef) -> None:
        self._mutable()
        self._g.remove_node(self._existing(ref))

    def add_generation(
        self,
        id: NodeRef,
        prompt: str | Template,
        output: str,
        *,
        append: bool = False,
        items: int | None = None,
        each: Mapping[str, str] | tuple[Binding, ...] | None = None,
        system: str | Template | None = None,
        chat: bool | None = None,
        span: Span | None = None,
        **sampling: Any,
    ) -> Generate:
        """`items=4`: the output is a list of at most 4 items (the text's lines). `each=
        {"q": "queries"}`: a map, one generation per item of `queries` with `{q}` bound to it.
        `system="..."`: a chat turn with that system message and `prompt` as the user message,
        rendered with the model's chat template; `chat=True` makes a chat turn without one."""
        nid = self._new_id(id, span)
        template = _template(prompt, nid, span)
        system_template = None if system is None else _template(system, nid, span)
        is_chat = system is not None if chat is None else chat
        if isinstance(sampling.get("stop"), str):
            sampling["stop"] = (sampling["stop"],)
        return self.add_node(_made("generation", nid, span, lambda: Generate(
            id=nid, prompt=template, output=output, append=append, sampling=Sampling(**sampling),
            items=items, each=bindings(each), chat=is_chat, system=system_template,
            span=span)))  # type: ignore[return-value]

    def add_retrieval(
        self,
        id: NodeRef,
        topk: int = 5,
        query: str | Template = "question",
        output: str = "docs",
        *,
        nprobe: int | None = None,
        each: Mapping[str, str] | tuple[Binding, ...] | None = None,
        mode: str = "dense",
        filter: Mapping[str, str | int] | None = None,  # noqa: A002
        span: Span | None = None,
    ) -> Retrieve:
        """`query` is a variable name (`"hypo"`) or a template (`"{question} {answer}"`).
        `each={"q": "queries"}`: a map, one search per item of `queries` (`query="q"`).
        `mode="hybrid"`: fused with the index's keyword search (BM25) by reciprocal rank
        fusion. `filter={"source": "guides/*.md", "title": "Serving"}`: only passages whose
        source matches the glob and whose fields equal the values (as `run`'s `filter`)."""
        nid = self._new_id(id, span)
        if isinstance(query, str) and query.isidentifier():
            template = Template.variable(query)
        else:
            template = _template(query, nid, span)
        return self.add_node(_made("retrieval", nid, span, lambda: Retrieve(
            id=nid, query=template, output=output, topk=topk, nprobe=nprobe, each=bindings(each),
            mode=mode, where=tuple(sorted((filter or {}).items())),
            span=span)))  # type: ignore[return-value]

    def add_merge(
        self,
        id: NodeRef,
        method: str,
        input: str,
        output: str,
        *,
        k: int = RRF_K,
        topk: int | None = None,
        span: Span | None = None,
    ) -> Merge:
        """Combine the list `input` into `output`: "rrf" (reciprocal-rank fusion, constant `k`),
        "dedup" (passages by id) or "concat"; `topk` keeps the first passages."""
        nid = self._new_id(id, span)
        return self.add_node(_made("merge", nid, span, lambda: Merge(
            id=nid, method=method, input=input, output=output, k=k, topk=topk,
            span=span)))  # type: ignore[return-value]

    def add_edge(
        self,
        src: NodeRef,
        dst: NodeRef,
        when: str | Callable[[Mapping[str, Value]], bool] | Condition | None = None,
        *,
        max_iters: int | None = None,
        kind: EdgeKind | None = None,
        span: Span | None = None,
    ) -> Edge:
        """A control edge. With `when` it is conditional; with `max_iters` it is a bounded loop."""
        self._mutable()
        condition = None if when is None else Condition.of(when)
        if kind is None:
            kind = EdgeKind.LOOP if max_iters is not None else (
                EdgeKind.COND if condition is not None else EdgeKind.NEXT
            )
        if max_iters is not None and (
            not isinstance(max_iters, int) or isinstance(max_iters, bool) or max_iters < 1
        ):
            raise WorkflowError(f"a loop bound must be a positive integer, got {max_iters!r}", span=span)
        edge = Edge(
            src=node_id(src), dst=node_id(dst), kind=kind, condition=condition,
            max_iters=max_iters, span=span,
        )
        return self.insert_edge(edge)

    def insert_edge(self, edge: Edge) -> Edge:
        """Add a prepared edge of any kind (passes use this)."""
        self._mutable()
        for end in (edge.src, edge.dst):
            if end not in self._g:
                raise WorkflowError(
                    f"edge {edge.src} -> {edge.dst} names unknown node {end!r}",
                    span=edge.span, node=end,
                )
        self._edge_seq += 1
        self._g.add_edge(edge.src, edge.dst, key=self._edge_seq, edge=edge)
        return edge

    def remove_edge(self, edge: Edge) -> None:
        self._mutable()
        for src, dst, key, data in list(self._g.edges(keys=True, data=True)):
            if data["edge"] is edge:
                self._g.remove_edge(src, dst, key)
                return
        raise WorkflowError(f"no edge {edge.src} -> {edge.dst} to remove")

    # ----- reading -------------------------------------------------------------------------------

    def node(self, ref: NodeRef) -> Node:
        return self._g.nodes[self._existing(ref)]["node"]

    def __contains__(self, ref: object) -> bool:
        return isinstance(ref, str | int) and str(ref) in self._g

    def nodes(self) -> Iterator[Node]:
        """All nodes in insertion order."""
        return (data["node"] for _, data in self._g.nodes(data=True))

    def edges(self, kinds: frozenset[EdgeKind] | None = None) -> Iterator[Edge]:
        """All edges in insertion order, optionally only the given kinds."""
        found = sorted(self._g.edges(keys=True, data=True), key=lambda e: e[2])
        return (d["edge"] for *_, d in found if kinds is None or d["edge"].kind in kinds)

    def out_edges(self, ref: NodeRef, control_only: bool = False) -> list[Edge]:
        """Out-edges in declaration order (the order conditions are tried in)."""
        found = sorted(self._g.out_edges(self._existing(ref), keys=True, data=True), key=lambda e: e[2])
        edges = [d["edge"] for *_, d in found]
        return [e for e in edges if e.kind.is_control] if control_only else edges

    def in_edges(self, ref: NodeRef, control_only: bool = False) -> list[Edge]:
        found = sorted(self._g.in_edges(self._existing(ref), keys=True, data=True), key=lambda e: e[2])
        edges = [d["edge"] for *_, d in found]
        return [e for e in edges if e.kind.is_control] if control_only else edges

    def control_graph(self) -> nx.MultiDiGraph:
        """A copy of the structure with control edges only (for analyses; never mutate self)."""
        g = nx.MultiDiGraph()
        g.add_nodes_from(self._g.nodes)
        g.add_edges_from((e.src, e.dst) for e in self.edges() if e.kind.is_control)
        return g

    def structure(self) -> nx.MultiDiGraph:
        """A read-only view of the full structure (for drawing and analyses)."""
        return self._g.copy(as_view=True)

    # ----- lifecycle -----------------------------------------------------------------------------

    @property
    def frozen(self) -> bool:
        return self._frozen

    def freeze(self) -> RAGraph:
        """A read-only copy."""
        out = self.copy()
        out._frozen = True
        return out

    def copy(self) -> RAGraph:
        out = RAGraph.__new__(RAGraph)
        out.name = self.name
        out.inputs = dict(self.inputs)
        out._g = self._g.copy()
        out._edge_seq = self._edge_seq
        out._frozen = False
        return out

    def verify(self) -> None:
        from ragraph.ir.verify import verify

        verify(self)

    def __str__(self) -> str:
        from ragraph.ir.listing import listing

        return listing(self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RAGraph):
            return NotImplemented
        return (
            self.name == other.name
            and self.inputs == other.inputs
            and {n.id: n for n in self.nodes()} == {n.id: n for n in other.nodes()}
            and all(self.out_edges(n.id) == other.out_edges(n.id) for n in self.nodes())
        )

    __hash__ = None  # type: ignore[assignment]

    # ----- helpers -------------------------------------------------------------------------------

    def _mutable(self) -> None:
        if self._frozen:
            raise WorkflowError(f"workflow {self.name!r} is compiled and read-only; copy() it to edit")

    def _existing(self, ref: NodeRef) -> str:
        nid = node_id(ref)
        if nid not in self._g:
            raise WorkflowError(f"unknown node {nid!r}", node=nid)
        return nid

    def _new_id(self, ref: NodeRef, span: Span | None) -> str:
        nid = node_id(ref)
        if nid in RESERVED_IDS:
            raise WorkflowError(f"{nid} is reserved and cannot name a node", span=span, node=nid)
        return nid


def _made(what: str, nid: str, span: Span | None, build: Callable[[], Node]) -> Node:
    """`build()`, its invalid arguments reported as the node's error."""
    try:
        return build()
    except TypeError as err:  # an unknown keyword (a misspelt sampling option)
        raise WorkflowError(f"{what} {nid!r}: {err}", span=span, node=nid) from err
    except WorkflowError as err:
        raise WorkflowError(f"{what} {nid!r}: {err.message}", span=span, node=nid,
                            hint=err.hint) from err


def _template(text: str | Template, nid: str, span: Span | None) -> Template:
    if isinstance(text, Template):
        return text
    try:
        return Template.parse(text)
    except TemplateError as err:
        raise TemplateError(f"node {nid!r}: {err.message}", err.offset, err.hint) from err
