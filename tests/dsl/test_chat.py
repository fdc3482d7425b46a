"""Chat turns in `.rag` (`system =` / `user =`, or `chat = true`) and in the Python builder
(`system=`, `chat=True`): the same graphs, printed back to the same graphs, mistakes located at
file:line:col."""

from __future__ import annotations

import pytest

from ragraph import END, START, RAGraph
from ragraph.dsl import parse, to_rag
from ragraph.errors import WorkflowError
from ragraph.ir.chat import SEPARATOR
from ragraph.ir.serialize import from_json, to_json

HEAD = "workflow w\ninput question\n"
MESSAGES = HEAD + '''generate answer -> answer (max_tokens = 8):
    system = "Answer briefly about {question}."
    user = """
        Documents go here.

        Question: {question}
        """
'''


def builder(**kw: object) -> RAGraph:
    g = RAGraph("w")
    g.add_input("question")
    g.add_generation("answer", prompt="Documents go here.\n\nQuestion: {question}",
                     output="answer", max_tokens=8, **kw)
    g.add_edge(START, "answer")
    g.add_edge("answer", END)
    return g


def test_the_message_form_is_the_builders_system_argument():
    parsed = parse(MESSAGES)
    node = parsed.node("answer")
    assert node.chat and node.system.text == "Answer briefly about {question}."
    assert node.prompt.text == "Documents go here.\n\nQuestion: {question}"
    assert parsed == builder(system="Answer briefly about {question}.")
    assert node.reads() == {"question"}


def test_chat_true_is_a_turn_without_a_system_message():
    text = HEAD + 'generate answer -> answer (max_tokens = 8, chat = true): ' \
        '"Documents go here.\\n\\nQuestion: {question}"\n'
    assert parse(text) == builder(chat=True)
    assert parse(text) != builder()  # the completion form is another graph
    bare = HEAD + 'generate answer -> answer (max_tokens = 8):\n' \
        '    user = "Documents go here.\\n\\nQuestion: {question}"\n'
    assert parse(bare) == builder(chat=True)


@pytest.mark.parametrize("kw", [{}, {"chat": True}, {"system": "Be brief."},
                                {"system": "Line one\nline {question}"},
                                {"system": "x" * 120}, {"system": 'quote " and {{braces}}'}])
def test_round_trip_rag_graph_rag(kw):
    g = builder(**kw)
    printed = to_rag(g)
    assert parse(printed) == g
    assert to_rag(parse(printed)) == printed
    assert from_json(to_json(g)) == g


def test_a_chat_turn_prints_in_the_message_form():
    printed = to_rag(builder(system="Be brief."))
    assert '    system = "Be brief."\n    user = """\n        Documents go here.\n' in printed
    assert "chat = true" not in printed


def test_the_listing_shows_the_turn():
    listing = str(builder(system="Be brief."))
    assert 'chat=true system="Be brief."' in listing


def test_flat_prompt_is_system_then_user():
    node = builder(system="Be brief.").node("answer")
    assert node.flat_prompt.text == "Be brief." + SEPARATOR + node.prompt.text
    assert builder().node("answer").flat_prompt == builder().node("answer").prompt


def test_the_builder_refuses_a_system_message_on_a_completion():
    with pytest.raises(WorkflowError, match="system message makes the generation a chat turn"):
        builder(system="s", chat=False)


# (name, source, line, column, message fragment, hint fragment or None)
CASES = [
    ("user first", HEAD + 'generate a -> b:\n    user = "u"\n    system = "s"\n',
     5, 5, "unexpected 'system'", None),
    ("no user", HEAD + 'generate a -> b:\n    system = "s"\n', 4, 17, "expected 'user'", None),
    ("assistant role", HEAD + 'generate a -> b:\n    assistant = "x"\n',
     4, 5, "unexpected 'assistant', expected 'system', 'user'", None),
    ("undefined in system", HEAD + 'generate a -> b:\n    system = "{questoin}"\n    user = "u"\n',
     4, 16, "undefined variable 'questoin'", "did you mean 'question'?"),
    ("undefined in user", HEAD + 'generate a -> b:\n    user = """\n        {docs}\n        """\n',
     5, 10, "undefined variable 'docs'", None),
    ("chat false with messages", HEAD + 'generate a -> b (chat = false):\n    user = "u"\n',
     3, 25, "`chat = false` on a generation written as chat messages", "line 4"),
    ("chat not a bool", HEAD + 'generate a -> b (chat = "yes"): "x"\n',
     3, 25, "chat must be true or false", None),
    ("message on the header line", HEAD + 'generate a -> b: user = "u"\n',
     3, 18, "unexpected 'user'", None),
]


@pytest.mark.parametrize(("name", "src", "line", "col", "message", "hint"), CASES,
                         ids=[c[0] for c in CASES])
def test_mistake_is_located(name, src, line, col, message, hint):
    with pytest.raises(WorkflowError) as info:
        parse(src, file="wf.rag")
    err = info.value
    assert (err.span.line, err.span.col) == (line, col), err.render()
    assert message in err.message, err.render()
    assert err.span.file == "wf.rag"
    if hint:
        assert hint in (err.hint or ""), err.render()
    assert f"wf.rag:{line}:{col}:" in err.render()
