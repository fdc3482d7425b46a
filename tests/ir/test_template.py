"""Prompt templates: holes, literal braces, errors with offsets."""

from __future__ import annotations

import pytest

from ragraph.ir import Template
from ragraph.ir.template import Hole, TemplateError
from ragraph.ir.values import Passage, Passages


def test_holes_and_offsets():
    t = Template.parse("Q: {question}\nD: {docs}")
    assert t.holes == (Hole("question", 3), Hole("docs", 17))
    assert t.variables == {"question", "docs"}


def test_literal_braces_and_rendering():
    t = Template.parse('{{"json": {x}}}')
    assert t.variables == {"x"}
    assert t.render({"x": 1}) == '{"json": 1}'


def test_passages_render_in_the_one_format():
    t = Template.parse("{docs}")
    docs = Passages((Passage(7, "Paris", "Capital of France."),))
    assert t.render({"docs": docs}) == "Document 1 (Title: Paris) Capital of France."


def test_single_variable():
    assert Template.variable("q").single_variable == "q"
    assert Template.parse("{q} ").single_variable is None


@pytest.mark.parametrize(("text", "offset", "message"), [
    ("a {b", 2, "unclosed '{'"),
    ("a } b", 2, "unmatched '}'"),
    ("{not a name}", 0, "is not a variable hole"),
    ("{ x }", 0, "is not a variable hole"),
])
def test_errors_carry_offsets(text, offset, message):
    with pytest.raises(TemplateError) as caught:
        Template.parse(text)
    assert message in caught.value.message and caught.value.offset == offset
