"""Builder forms of the workflow shapes the executors must agree on."""

from __future__ import annotations

from ragraph import END, START, RAGraph


def hyde() -> RAGraph:
    g = RAGraph("hyde")
    g.add_input("question")
    g.add_generation("hypo", prompt="Write a passage answering: {question}\nPassage:",
                     output="passage", max_tokens=24)
    g.add_retrieval("search", topk=3, query="passage", output="docs")
    g.add_generation("answer", prompt="{docs}\nQuestion: {question}\nAnswer:", output="answer",
                     max_tokens=8)
    for a, b in ((START, "hypo"), ("hypo", "search"), ("search", "answer"), ("answer", END)):
        g.add_edge(a, b)
    return g


def irg(rounds: int = 3) -> RAGraph:
    g = RAGraph("irg")
    g.add_input("question")
    g.add_input("answer", "")
    g.add_retrieval("search", topk=3, query="{question} {answer}", output="docs")
    g.add_generation("gen", prompt="{docs}\nQ: {question}\nA:", output="answer", max_tokens=12)
    g.add_edge(START, "search")
    g.add_edge("search", "gen")
    g.add_edge("gen", "search", max_iters=rounds - 1)
    g.add_edge("gen", END)
    return g


def multistep() -> RAGraph:
    g = RAGraph("multistep")
    g.add_input("question")
    g.add_input("notes", "")
    g.add_generation("decompose", prompt="{question}\n{notes}\nNext sub-question:", output="subq",
                     max_tokens=10)
    g.add_retrieval("search", topk=2, query="subq", output="docs")
    g.add_generation("sub", prompt="{docs}\n{subq}\nAnswer:", output="notes", append=True,
                     max_tokens=6)
    g.add_generation("final", prompt="{notes}\nQuestion: {question}\nAnswer:", output="answer",
                     max_tokens=8)
    g.add_edge(START, "decompose")
    g.add_edge("decompose", "search")
    g.add_edge("search", "sub")
    g.add_edge("sub", "decompose", 'not (subq contains "e")', max_iters=3)
    g.add_edge("sub", "final")
    g.add_edge("final", END)
    return g


ALL = {"hyde": hyde, "irg": irg, "multistep": multistep}
