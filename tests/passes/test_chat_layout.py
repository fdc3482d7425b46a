"""prefix-layout on chat turns: [system][documents][question] is laid out on the turn's flat text
(`ir.chat`), a fixed system message is part of the static prefix, a per-request value in it is
remarked, and the runtime's segments fall where the rendered turn's text puts them."""

from __future__ import annotations

from ragraph import END, START, RAGraph
from ragraph.ir.chat import SEPARATOR
from ragraph.ir.values import Passage, Passages
from ragraph.passes import compile
from ragraph.runtime import effects
from ragraph.runtime.llm.chat import prompt_text
from tests.passes.graphs import chat


def test_a_fixed_system_message_is_part_of_the_static_prefix():
    c = compile(chat(), "split-stages,prefix-layout")
    node = c.graph.node("answer.prefill")
    assert node.layout.reusable and node.layout.docs == ("docs",)
    assert node.layout.static == "Answer from the documents." + SEPARATOR
    assert node.prompt.text == "{docs}\nQuestion: {question}"  # never changed
    assert node.chat and node.system.text == "Answer from the documents."


def test_a_per_request_value_in_the_system_message_is_remarked():
    c = compile(chat(), "split-stages,prefix-layout{rewrite=true}")
    remarks = [r for r in c.remarks if r.node == "polish"]
    assert len(remarks) == 1 and "system message holds {question}" in remarks[0].message
    assert not c.graph.node("polish.prefill").layout.reusable
    assert c.graph.node("polish.prefill").prompt.text == "{docs}\n{answer}"  # not rewritten


def test_rewrite_moves_the_documents_within_the_user_message():
    g = RAGraph("w")
    g.add_input("question")
    g.add_retrieval("ret", topk=2, query="question", output="docs")
    g.add_generation("a", prompt="Question: {question}\nDocuments:\n{docs}\nAnswer.",
                     system="Use the documents.", output="answer")
    g.add_edge(START, "ret")
    g.add_edge("ret", "a")
    g.add_edge("a", END)
    plain = compile(g, "split-stages,prefix-layout")
    assert "{question} comes before the documents {docs}" in plain.remarks[0].message
    moved = compile(g, "split-stages,prefix-layout{rewrite=true}").graph.node("a.prefill")
    assert moved.prompt.text.startswith("Documents:\n{docs}\nQuestion: {question}")
    assert moved.layout.reusable
    assert moved.layout.static == "Use the documents." + SEPARATOR + "Documents:\n"


def test_segments_fall_on_the_rendered_turns_text():
    node = compile(chat(), "split-stages,prefix-layout").graph.node("answer.prefill")
    docs = Passages((Passage(1, "T", "a passage"), Passage(2, "U", "another")))
    variables = {"question": "why?", "docs": docs}
    turn = effects.generation_prompt_of(node.prompt, variables, node.system, node.chat)
    text = prompt_text(turn)
    seg = effects.prompt_segments(node.flat_prompt, node.layout, variables)
    assert text[:seg.static_end] == "Answer from the documents." + SEPARATOR
    assert text[seg.docs_end:] == "\nQuestion: why?"
    assert [m.role for m in turn] == ["system", "user"]
