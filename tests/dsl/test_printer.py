"""`to_rag`: what prints, what refuses to, and prompts that survive printing byte for byte."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragraph import END, START, RAGraph
from ragraph.dsl import parse, to_rag
from ragraph.dsl.strings import decode_block, encode_block
from ragraph.errors import WorkflowError
from ragraph.ir import Edge, EdgeKind


def one_node(prompt: str, **sampling) -> RAGraph:
    rag = RAGraph("w")
    rag.add_input("question")
    rag.add_generation("a", prompt=prompt, output="answer", **sampling)
    rag.add_edge(START, "a")
    rag.add_edge("a", END)
    return rag


@pytest.mark.parametrize("prompt", [
    "", "short {question}", "two\nlines {question}", "  indented first\nsecond",
    "    all\n    indented", "trailing newline\n", "\nleading newline", "tab\tinside\n\tand",
    'has """ triple quotes', 'quote " and backslash \\ and \\n', "blank\n   \nwhitespace line",
    "x" * 150, "ends with spaces   ", "{{literal braces}} {question}",
])
def test_prompt_survives_printing(prompt):
    rag = one_node(prompt)
    assert parse(to_rag(rag)) == rag


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(list('ab "\\\t\n#:{}') + ["{question}", '"""']), max_size=40)
       .map("".join))
def test_any_prompt_survives_printing(text):
    prompt = text.replace("{", "{{").replace("}", "}}").replace("{{question}}", "{question}")
    rag = one_node(prompt)
    assert parse(to_rag(rag)).node("a").prompt.text == prompt


def test_block_form_is_used_when_exact():
    assert encode_block("a\n  b", "    ") == '"""\n    a\n      b\n    """'
    assert encode_block("  a\n  b", "    ") is None  # dedenting would eat the shared indent
    assert decode_block('"""\n    a\n\n    b\n    """', 1, 1, None).value == "a\n\nb"


def test_options_inputs_and_append_print():
    rag = RAGraph("w")
    rag.add_input("question")
    rag.add_input("n", 3)
    rag.add_input("t", 0.5)
    rag.add_input("flag", True)
    rag.add_input("notes", "x\ny")
    rag.add_generation("a", prompt="{question} {notes}", output="notes", append=True,
                       temperature=0.7, top_p=0.9, seed=7, logprobs=True, stop=["\n", "Q:"])
    rag.add_retrieval("r", topk=3, nprobe=16, query="{question} {notes}", output="docs")
    rag.add_generation("b", prompt="{docs}", output="answer")
    for src, dst in [(START, "a"), ("a", "r"), ("r", "b"), ("b", END)]:
        rag.add_edge(src, dst)
    text = to_rag(rag)
    assert "generate a -> notes += (temperature = 0.7, top_p = 0.9" in text
    assert 'retrieve r -> docs (topk = 3, nprobe = 16):\n    query = "{question} {notes}"' in text
    assert 'input notes = "x\\ny"' in text
    assert parse(text) == rag


def test_integer_ids_print_and_parse_back():
    rag = RAGraph()
    rag.add_input("question")
    rag.add_generation(0, prompt="{question}", output="answer")
    rag.add_edge(START, 0)
    rag.add_edge(0, 0, when='answer == "again"', max_iters=2)
    rag.add_edge(0, END)
    text = to_rag(rag)
    assert '0 -> 0 if answer == "again" loop max 2' in text
    assert parse(text) == rag


def test_out_edge_order_is_kept():
    rag = parse('input question\ngenerate a -> answer: "{question}"\nflow:\n'
                '    start -> a\n    a -> end if answer == "x"\n    a -> a loop max 2\n'
                '    a -> end\n')
    assert [e.kind for e in rag.out_edges("a")] == [EdgeKind.COND, EdgeKind.LOOP, EdgeKind.NEXT]
    assert parse(to_rag(rag)) == rag


@pytest.mark.parametrize(("build", "message"), [
    (lambda g: g.add_generation("my node", prompt="x", output="answer"), "node id 'my node'"),
    (lambda g: g.add_generation("flow", prompt="x", output="answer"), "node id 'flow'"),
    (lambda g: g.add_generation("start", prompt="x", output="answer"), "node id 'start'"),
    (lambda g: g.add_generation("a", prompt="x", output="an-swer"), "variable 'an-swer'"),
    (lambda g: g.add_input("n", float("inf")), "cannot be written"),
    (lambda g: g.insert_edge(Edge(src=START, dst=END, kind=EdgeKind.SPECULATIVE)),
     "speculative edge, which has no .rag form"),
    (lambda g: g.add_edge(START, END, when="1 == loop"), "cannot be written in .rag"),
])
def test_what_rag_cannot_express_is_a_clear_error(build, message):
    rag = RAGraph("w")
    build(rag)
    with pytest.raises(WorkflowError, match=message):
        to_rag(rag)


def test_workflow_name_must_be_a_name():
    with pytest.raises(WorkflowError, match="workflow name 'my flow'"):
        to_rag(RAGraph("my flow"))
