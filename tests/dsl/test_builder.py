"""The Python builder and the `.rag` language describe the same graphs, and the paper's two
listings (HedraRAG's HyDE and multistep graphs) work almost verbatim."""

from __future__ import annotations

from collections import Counter

import pytest

from ragraph import END, START, RAGraph
from ragraph.dsl import load, parse, to_rag
from ragraph.errors import WorkflowError
from ragraph.ir.control import choose_edge, control_table
from ragraph.ir.serialize import from_json, to_json
from tests.dsl.paths import ROOT

ANSWER = """Answer the question with a short answer taken from the documents.

{docs}

Question: Who wrote the novel Middlemarch?
Answer: George Eliot

Question: {question}
Answer:"""

PASSAGE = """Write a short encyclopedia passage that answers the question.

Question: Who wrote the novel Middlemarch?
Passage: Middlemarch is a novel by the English author George Eliot, first published in 1871. \
It is set in a fictional Midlands town.

Question: {question}
Passage:"""

ASK = """Break the question into simpler follow-up questions. Given the facts found so far, write the
next follow-up question, or "none" when the facts already answer the question.

Question: Who lived longer, Muhammad Ali or Alan Turing?
Facts:
Follow-up: How old was Muhammad Ali when he died?

Question: Who lived longer, Muhammad Ali or Alan Turing?
Facts:
Muhammad Ali was 74 years old when he died.
Follow-up: How old was Alan Turing when he died?

Question: Who lived longer, Muhammad Ali or Alan Turing?
Facts:
Muhammad Ali was 74 years old when he died.
Alan Turing was 41 years old when he died.
Follow-up: none

Question: {question}
Facts:
{facts}
Follow-up:"""

STEP = """Answer the question with one full sentence using the documents.

{docs}

Question: How old was Alan Turing when he died?
Answer: Alan Turing was 41 years old when he died.

Question: {subquestion}
Answer:"""

FINAL = """Answer the question with a short answer using the facts.

Facts:
Muhammad Ali was 74 years old when he died.
Alan Turing was 41 years old when he died.
Question: Who lived longer, Muhammad Ali or Alan Turing?
Answer: Muhammad Ali

Facts:
{facts}
Question: {question}
Answer:"""


def test_hyde_builder_equals_rag():
    rag = RAGraph("hyde")
    rag.add_input("question")
    rag.add_generation("hypo", prompt=PASSAGE, output="passage", max_tokens=64, stop=["\n\n", "\nQuestion:", "\nPassage:"])
    rag.add_retrieval("search", topk=5, query="{question} {passage}", output="docs")
    rag.add_generation("answer", prompt=ANSWER, output="answer", max_tokens=24, stop=["\n\n", "\nQuestion:", "\nAnswer:"])
    rag.add_edge(START, "hypo")
    rag.add_edge("hypo", "search")
    rag.add_edge("search", "answer")
    rag.add_edge("answer", END)
    assert rag == load(ROOT / "workflows" / "hyde.rag")


def test_multistep_builder_equals_rag():
    rag = RAGraph("multistep")
    rag.add_input("question")
    rag.add_input("facts", "")
    rag.add_generation("ask", prompt=ASK, output="subquestion", max_tokens=32, stop=["\n"])
    rag.add_retrieval("search", topk=3, query="subquestion", output="docs")
    rag.add_generation("step", prompt=STEP, output="facts", append=True, max_tokens=40, stop="\n")
    rag.add_generation("answer", prompt=FINAL, output="answer", max_tokens=24, stop=["\n\n", "\nQuestion:", "\nAnswer:"])
    rag.add_edge(START, "ask")
    rag.add_edge("ask", "answer")
    rag.add_edge("answer", END)
    rag.add_edge("ask", "search",
                 when='len(trim(subquestion)) > 0 and not (lower(subquestion) contains "none")')
    rag.add_edge("search", "step")
    rag.add_edge("step", "answer")
    rag.add_edge("step", "ask", max_iters=2)
    assert rag == load(ROOT / "workflows" / "multistep.rag")


# ----- the paper's listings, with integer ids -------------------------------------------------


def paper_hyde() -> RAGraph:
    rag = RAGraph()
    rag.add_input("question")
    rag.add_generation(0, prompt=PASSAGE, output="hypo")
    rag.add_retrieval(1, topk=5, query="hypo", output="docs")
    rag.add_generation(2, prompt=ANSWER, output="answer")
    rag.add_edge(START, 0)
    rag.add_edge(0, 1)
    rag.add_edge(1, 2)
    rag.add_edge(2, END)
    return rag


def paper_multistep(when) -> RAGraph:
    """Loop while a sub-question remains: generate one, retrieve for it, answer it, repeat."""
    rag = RAGraph()
    rag.add_input("question")
    rag.add_input("notes", "")
    rag.add_generation(0, prompt="Question: {question}\n{notes}\nFollow up:", output="subq")
    rag.add_retrieval(1, topk=5, query="subq", output="docs")
    rag.add_generation(2, prompt="{docs}\nQuestion: {subq}\nAnswer:", output="notes", append=True)
    rag.add_generation(3, prompt="{notes}\nQuestion: {question}\nAnswer:", output="answer")
    rag.add_edge(START, 0)
    rag.add_edge(0, 1)
    rag.add_edge(1, 2)
    rag.add_edge(2, 0, when=when, max_iters=4)
    rag.add_edge(2, 3)
    rag.add_edge(3, END)
    return rag


def test_paper_hyde_verifies_and_round_trips():
    rag = paper_hyde()
    rag.verify()
    assert from_json(to_json(rag)) == rag
    text = to_rag(rag)
    assert "generate 0 -> hypo:" in text and "start -> 0 -> 1 -> 2 -> end" in text
    assert parse(text) == rag


def test_paper_multistep_with_a_callable_verifies_but_does_not_serialize():
    rag = paper_multistep(lambda s: "none" not in s["subq"].lower())
    rag.verify()
    with pytest.raises(WorkflowError, match="Python callable condition, which cannot be serialized"):
        to_json(rag)
    with pytest.raises(WorkflowError, match="callable condition, which .rag cannot express"):
        to_rag(rag)


def test_paper_multistep_with_an_expression_round_trips():
    rag = paper_multistep('not (lower(subq) contains "none")')
    rag.verify()
    assert from_json(to_json(rag)) == rag
    assert parse(to_rag(rag)) == rag


def test_paper_multistep_loops_while_a_subquestion_remains():
    rag = paper_multistep(lambda s: "none" not in s["subq"].lower())
    counts: Counter[int] = Counter()
    after = control_table(rag)["2"]
    taken = [choose_edge(after, "2", {"subq": "Who?"}, counts).dst for _ in range(5)]
    assert taken == ["0", "0", "0", "0", "3"]  # bounded by max_iters=4, then on
    assert choose_edge(after, "2", {"subq": "none"}, Counter()).dst == "3"
