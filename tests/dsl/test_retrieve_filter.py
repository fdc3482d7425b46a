"""A retrieve node's `filter` option: the `FIELD=VALUE` items `ragraph run --filter` takes, read
into the node's conditions, written back by the printer, kept by JSON serialization, and a bad
one reported at file:line:col."""

from __future__ import annotations

import pytest

from ragraph.dsl import parse, to_rag
from ragraph.errors import WorkflowError
from ragraph.ir import RAGraph
from ragraph.ir.nodes import Retrieve
from ragraph.ir.serialize import from_json, to_json
from tests.dsl.test_errors import assert_located

HEAD = "input question\n"
TAIL = "    query = question\n" + 'generate a -> answer: "{docs} {question}"\n'


def retrieve(source: str) -> Retrieve:
    node = parse(source).node("search")
    assert isinstance(node, Retrieve)
    return node


def test_one_item_and_a_list_of_items_become_sorted_conditions():
    one = retrieve(HEAD + 'retrieve search -> docs (filter = "source=guides/*.md"):\n' + TAIL)
    assert one.where == (("source", "guides/*.md"),)
    several = retrieve(HEAD + 'retrieve search -> docs (mode = "hybrid", filter = '
                       '["title=Serving", "doc_id=3", "source=*/docs/*"]):\n' + TAIL)
    # digits are an integer field value, as with --filter; a source stays a glob string
    assert several.where == (("doc_id", 3), ("source", "*/docs/*"), ("title", "Serving"))
    assert retrieve(HEAD + "retrieve search -> docs:\n" + TAIL).where == ()


@pytest.mark.parametrize("option", ['filter = "source=guides/*.md"',
                                    'topk = 3, filter = ["source=*.md", "title=A b", "doc_id=7"]'])
def test_the_printer_and_json_keep_the_filter(option):
    graph = parse(HEAD + f"retrieve search -> docs ({option}):\n" + TAIL)
    again = parse(to_rag(graph))
    assert again.node("search") == graph.node("search")
    assert from_json(to_json(graph)).node("search") == graph.node("search")


def test_the_builder_takes_the_filter_as_a_mapping():
    g = RAGraph("b")
    g.add_input("question")
    node = g.add_retrieval("search", filter={"title": "X", "source": "*.md"})
    assert node.where == (("source", "*.md"), ("title", "X"))
    with pytest.raises(WorkflowError, match="filter source must be a glob string"):
        g.add_retrieval("other", filter={"source": 3})


@pytest.mark.parametrize(("option", "col", "message"), [
    ('filter = "guides/*.md"', 35,
     "filter must be FIELD=VALUE (source=GLOB for the document path), got 'guides/*.md'"),
    ('filter = ["source=*.md", "=x"]', 36, "filter must be FIELD=VALUE"),
    ("filter = 3", 35, 'filter must be a "FIELD=VALUE" string or a list of them, got 3'),
    ('topk = 2, filter = [true]', 46, 'filter must be a "FIELD=VALUE" string or a list'),
])
def test_a_bad_filter_is_located(option, col, message):
    source = HEAD + f"retrieve search -> docs ({option}):\n" + TAIL
    assert_located(source, 2, col, message, None)
