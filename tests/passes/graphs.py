"""Builder graphs for the pass tests: the shapes of the paper's workflows, written with the
Python API (the `.rag` workflows are tested through the golden files)."""

from __future__ import annotations

from ragraph import END, START, RAGraph

DOCS_LAST = "Answer the question using the documents.\nQuestion: {question}\nDocuments:\n{docs}\nAnswer:"
DOCS_FIRST = "Answer the question using the documents.\nDocuments:\n{docs}\nQuestion: {question}\nAnswer:"


def hyde() -> RAGraph:
    g = RAGraph("hyde")
    g.add_input("question")
    g.add_generation("hypo", prompt="Write a passage answering: {question}", output="passage")
    g.add_retrieval("ret", topk=3, query="passage", output="docs")
    g.add_generation("answer", prompt=DOCS_FIRST, output="answer")
    for a, b in ((START, "hypo"), ("hypo", "ret"), ("ret", "answer"), ("answer", END)):
        g.add_edge(a, b)
    return g


def multistep() -> RAGraph:
    """Ask a sub-question, retrieve, note the answer; loop until no sub-question remains."""
    g = RAGraph("multistep")
    g.add_input("question")
    g.add_input("notes", "")
    g.add_generation("subq", prompt="Question: {question}\nNotes: {notes}\nNext sub-question:",
                     output="sub")
    g.add_retrieval("ret", topk=2, query="sub", output="docs")
    g.add_generation("note", prompt=DOCS_LAST.replace("{question}", "{sub}"), output="notes",
                     append=True)
    g.add_generation("final", prompt="Notes:\n{notes}\nQuestion: {question}\nAnswer:",
                     output="answer")
    g.add_edge(START, "subq")
    g.add_edge("subq", "ret")
    g.add_edge("ret", "note")
    g.add_edge("note", "subq", when="len(notes) < 80", max_iters=3)
    g.add_edge("note", "final")
    g.add_edge("final", END)
    return g


def parallel() -> RAGraph:
    """Independent work in one straight line: rewire has something to do."""
    g = RAGraph("parallel")
    g.add_input("question")
    g.add_generation("kw", prompt="Keywords for: {question}", output="keywords")
    g.add_generation("style", prompt="Answer style for: {question}", output="style")
    g.add_retrieval("ret", topk=3, query="keywords", output="docs")
    g.add_generation("answer", prompt=DOCS_LAST + " ({style})", output="answer")
    for a, b in ((START, "kw"), ("kw", "style"), ("style", "ret"), ("ret", "answer"),
                 ("answer", END)):
        g.add_edge(a, b)
    return g


def selfrag() -> RAGraph:
    """A branch on the model's own judgment, then a merge."""
    g = RAGraph("selfrag")
    g.add_input("question")
    g.add_generation("judge", prompt="Need documents for {question}? yes/no", output="need")
    g.add_retrieval("ret", topk=3, query="question", output="docs")
    g.add_generation("rag", prompt=DOCS_LAST, output="answer")
    g.add_generation("direct", prompt="Question: {question}\nAnswer:", output="answer")
    g.add_generation("polish", prompt="Polish: {answer}", output="final")
    g.add_edge(START, "judge")
    g.add_edge("judge", "ret", when='need contains "yes"')
    g.add_edge("judge", "direct")
    g.add_edge("ret", "rag")
    g.add_edge("rag", "polish")
    g.add_edge("direct", "polish")
    g.add_edge("polish", END)
    return g


def fusion() -> RAGraph:
    """RAG-Fusion: rewrites, one retrieval per rewrite (a map), reciprocal-rank fusion, answer."""
    g = RAGraph("fusion")
    g.add_input("question")
    g.add_generation("rewrite", prompt="Search queries for: {question}", output="queries",
                     items=4)
    g.add_retrieval("ret", topk=3, query="{q}", output="results", each={"q": "queries"})
    g.add_merge("fuse", "rrf", input="results", output="docs", topk=4)
    g.add_generation("answer", prompt=DOCS_FIRST, output="answer")
    for a, b in ((START, "rewrite"), ("rewrite", "ret"), ("ret", "fuse"), ("fuse", "answer"),
                 ("answer", END)):
        g.add_edge(a, b)
    return g


def subquestions() -> RAGraph:
    """Decompose, answer each sub-question from its own retrieval (two zipped maps), then
    synthesize; a loop around the fan-out re-runs it on the partial answer."""
    g = RAGraph("subquestions")
    g.add_input("question")
    g.add_input("draft", "")
    g.add_generation("split", prompt="Sub-questions of: {question} {draft}", output="subqs",
                     items=3)
    g.add_retrieval("ret", topk=2, query="{sq} {question}", output="subdocs",
                    each={"sq": "subqs"})
    g.add_generation("solve", prompt="{d}\nQuestion: {sq}\nAnswer:", output="facts",
                     each={"sq": "subqs", "d": "subdocs"})
    g.add_merge("gather", "concat", input="facts", output="notes")
    g.add_merge("pool", "dedup", input="subdocs", output="docs")
    g.add_generation("answer", prompt=DOCS_FIRST + "\nNotes: {notes}", output="draft")
    g.add_edge(START, "split")
    for a, b in (("split", "ret"), ("ret", "solve"), ("solve", "gather"), ("gather", "pool"),
                 ("pool", "answer")):
        g.add_edge(a, b)
    g.add_edge("answer", "split", when="len(draft) < 40", max_iters=1)
    g.add_edge("answer", END)
    return g


def chat() -> RAGraph:
    """HyDE with chat turns: the hypothesis has a per-request system message (its documents-free
    turn needs no layout), the answer [system][documents][question] (reusable), and a rewrite
    turn whose system message names the question before the documents (not reusable: remarked)."""
    g = RAGraph("chat")
    g.add_input("question")
    g.add_generation("hypo", prompt="{question}", system="Write a passage answering {question}",
                     output="passage")
    g.add_retrieval("ret", topk=3, query="passage", output="docs")
    g.add_generation("answer", prompt="{docs}\nQuestion: {question}",
                     system="Answer from the documents.", output="answer")
    g.add_generation("polish", prompt="{docs}\n{answer}", system="Rewrite the answer to {question}",
                     output="final")
    for a, b in ((START, "hypo"), ("hypo", "ret"), ("ret", "answer"), ("answer", "polish"),
                 ("polish", END)):
        g.add_edge(a, b)
    return g


BUILDERS = {f.__name__: f for f in (hyde, multistep, parallel, selfrag, fusion, subquestions,
                                    chat)}
