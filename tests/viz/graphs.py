"""Graphs for the drawing tests: the paper's two listings through the builder, and a graph with the
node and edge kinds the passes add, inserted by hand so drawing is tested before the passes exist."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ragraph.ir import END, START, Edge, EdgeKind, Node, RAGraph


def hyde() -> RAGraph:
    g = RAGraph("hyde")
    g.add_input("question")
    g.add_generation(0, prompt="Write a passage that answers: {question}", output="hypo")
    g.add_retrieval(1, topk=5, query="hypo", output="docs")
    g.add_generation(2, prompt="Docs: {docs}\nQuestion: {question}\nAnswer:", output="answer")
    g.add_edge(START, 0)
    g.add_edge(0, 1)
    g.add_edge(1, 2)
    g.add_edge(2, END)
    return g


def multistep() -> RAGraph:
    g = RAGraph("multistep")
    g.add_input("question")
    g.add_input("notes", default="")
    g.add_generation("decompose", prompt="Q: {question}\nKnown: {notes}\nNext sub-question:",
                     output="subq")
    g.add_retrieval("search", topk=3, query="subq", output="docs")
    g.add_generation("note", prompt="{docs}\n{subq}", output="notes", append=True)
    g.add_generation("answer", prompt="{notes}\n{question}\nAnswer:", output="answer")
    g.add_edge(START, "decompose")
    g.add_edge("decompose", "answer", 'subq contains "<none>" or len(subq) < 3')
    g.add_edge("decompose", "search")
    g.add_edge("search", "note")
    g.add_edge("note", "decompose", max_iters=4)
    g.add_edge("note", "answer")
    g.add_edge("answer", END)
    return g


@dataclass(frozen=True, kw_only=True)
class Step(Node):
    kind: ClassVar[str] = "test-step"
    role: ClassVar[str] = "substage"
    of: str
    index: int


@dataclass(frozen=True, kw_only=True)
class Warm(Node):
    kind: ClassVar[str] = "test-prefetch"
    role: ClassVar[str] = "prefetch"
    in_control_flow: ClassVar[bool] = False
    target: str


@dataclass(frozen=True, kw_only=True)
class Check(Node):
    kind: ClassVar[str] = "test-verify"
    role: ClassVar[str] = "speculative"
    of: str


def optimized() -> RAGraph:
    """HyDE as the passes might leave it: retrieval split into steps, a speculative start of the
    answer with its commit and rollback, a prefetch side node, and a rewired data dependency."""
    g = hyde()
    for e in list(g.edges()):
        if (e.src, e.dst) in (("1", "2"), ("0", "1")):
            g.remove_edge(e)
    g.add_node(Step(id="1.s0", of="1", index=0))
    g.add_node(Step(id="1.s1", of="1", index=1))
    g.add_node(Check(id="2.verify", of="2"))
    g.add_node(Warm(id="1.prefetch", target="1"))
    g.add_edge(0, "1.s0")
    g.add_edge("1.s0", "1.s1")
    g.add_edge("1.s1", 1)
    g.add_edge(1, "2.verify")
    g.add_edge("2.verify", 2)
    g.insert_edge(Edge(src=START, dst="1.prefetch", kind=EdgeKind.DATA))
    g.insert_edge(Edge(src="1.prefetch", dst="1.s0", kind=EdgeKind.PREFETCH))
    g.insert_edge(Edge(src="1.s0", dst="2", kind=EdgeKind.SPECULATIVE))
    g.insert_edge(Edge(src="2.verify", dst="2", kind=EdgeKind.COMMIT))
    g.insert_edge(Edge(src="2.verify", dst="2", kind=EdgeKind.ROLLBACK))
    g.insert_edge(Edge(src=START, dst="2", kind=EdgeKind.DATA))
    return g


def fusion() -> RAGraph:
    """A map (one retrieval per generated query) and a merge."""
    g = RAGraph("fusion")
    g.add_input("question")
    g.add_generation("rewrite", prompt="Queries for: {question}", output="queries", items=3)
    g.add_retrieval("search", topk=4, query="q", output="results", each={"q": "queries"})
    g.add_merge("fuse", "rrf", input="results", output="docs", topk=4)
    g.add_generation("answer", prompt="{docs}\nQuestion: {question}\nAnswer:", output="answer")
    for a, b in ((START, "rewrite"), ("rewrite", "search"), ("search", "fuse"),
                 ("fuse", "answer"), ("answer", END)):
        g.add_edge(a, b)
    return g


def all_graphs() -> list[RAGraph]:
    return [hyde(), multistep(), optimized(), fusion()]
