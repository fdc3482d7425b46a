"""Fan-out values and rules: list splitting, branch binding, the three merges, and the builder's
errors for each misuse (the `.rag` forms are in tests/dsl/test_fanout_errors.py)."""

from __future__ import annotations

import pytest

from ragraph import END, START, RAGraph
from ragraph.errors import WorkflowError
from ragraph.ir import Binding, Items, Passage, Passages
from ragraph.ir.fanout import branch_states, merge, rrf, split_items
from ragraph.ir.serialize import from_json, to_json


def ps(*ids: int) -> Passages:
    return Passages(tuple(Passage(i, f"t{i}", f"text {i}") for i in ids))


def test_rrf_orders_by_summed_reciprocal_ranks():
    fused = rrf([ps(1, 2, 3), ps(2, 3, 4)], k=60)
    # 2: 1/62 + 1/61; 3: 1/63 + 1/62; 1: 1/61; 4: 1/63
    assert [p.id for p in fused] == [2, 3, 1, 4]


def test_rrf_breaks_ties_by_first_appearance_and_k_matters():
    assert [p.id for p in rrf([ps(7), ps(5)])] == [7, 5]
    # With a small k one first place outweighs three eighth places; with k = 60 it does not.
    runs = [ps(1, *range(11, 17), 9), ps(*range(21, 28), 9), ps(*range(31, 38), 9)]
    assert [p.id for p in rrf(runs, k=1)][0] == 1
    assert [p.id for p in rrf(runs, k=60)][0] == 9


def test_merges_of_passages_and_text():
    lists = Items((ps(1, 2), ps(2, 3)))
    assert merge("rrf", lists, topk=2).ids == (2, 1)
    assert merge("dedup", lists).ids == (1, 2, 3)
    assert merge("concat", lists).ids == (1, 2, 2, 3)
    assert merge("concat", Items(("a fact. ", " another"))) == "a fact.\nanother"
    assert merge("rrf", Items(())) == Passages()


def test_split_items_takes_lines_without_markers_up_to_the_bound():
    text = "1. first query\n\n- second\n  3) third  \n* fourth\nfifth"
    assert list(split_items(text, 4)) == ["first query", "second", "third", "fourth"]
    assert list(split_items("  \n", 4)) == []


def test_branches_bind_items_and_zip_lists():
    state = {"question": "q?", "subqs": Items(("a", "b")), "docs": Items((ps(1), ps(2)))}
    each = (Binding("s", "subqs"), Binding("d", "docs"))
    got = branch_states(each, state, "solve")
    assert [(b["s"], b["d"].ids) for b in got] == [("a", (1,)), ("b", (2,))]
    assert all(b["question"] == "q?" for b in got)
    with pytest.raises(WorkflowError, match="zips lists of different lengths"):
        branch_states(each, {**state, "docs": Items((ps(1),))}, "solve")


def fusion(**changes) -> RAGraph:
    """RAG-Fusion through the builder; `changes` replace one step's arguments."""
    g = RAGraph("fusion")
    g.add_input("question")
    g.add_generation("rewrite", prompt="Queries for {question}", output="queries",
                     **changes.get("rewrite", {"items": 4}))
    g.add_retrieval("search", **changes.get("search", {"query": "q", "output": "results",
                                                        "each": {"q": "queries"}}))
    g.add_merge("fuse", **changes.get("fuse", {"method": "rrf", "input": "results",
                                                "output": "docs"}))
    g.add_generation("answer", prompt=changes.get("prompt", "{docs} {question}"), output="answer")
    for a, b in ((START, "rewrite"), ("rewrite", "search"), ("search", "fuse"),
                 ("fuse", "answer"), ("answer", END)):
        g.add_edge(a, b)
    return g


def test_a_built_map_verifies_and_round_trips_through_json():
    g = fusion()
    g.verify()
    assert from_json(to_json(g)) == g
    assert "each=[q in queries]" in str(g) and "items=4" in str(g)


@pytest.mark.parametrize(("changes", "message"), [
    ({"search": {"query": "q", "output": "results", "each": {"q": "question"}}},
     "map 'search' maps over 'question', which holds text, not a list"),
    ({"rewrite": {"items": 0}}, "a list output holds 1..64 items, got 0"),
    ({"prompt": "{docs} {q}"}, "'q' is the item of map 'search'"),
    ({"prompt": "{queries}"}, "reads the list 'queries' as a whole"),
    ({"search": {"query": "question", "output": "results", "each": {"question": "queries"}}},
     "item name 'question' of map 'search' shadows the variable 'question'"),
    ({"fuse": {"method": "rrf", "input": "question", "output": "docs"}},
     "merge 'fuse' combines 'question', which holds text, not a list"),
    ({"fuse": {"method": "rff", "input": "results", "output": "docs"}}, "unknown merge 'rff'"),
    ({"fuse": {"method": "concat", "input": "results", "output": "docs", "k": 3}},
     "k is the constant of rrf"),
    ({"fuse": {"method": "dedup", "input": "queries", "output": "docs"}},
     "dedup merges passages; 'queries' is a text list"),
    ({"search": {"query": "q", "output": "results", "each": "queries"}},
     "each maps item names to list variables"),
])
def test_builder_misuse_names_the_node(changes, message):
    with pytest.raises(WorkflowError) as caught:
        fusion(**changes).verify()
    assert message in str(caught.value)
