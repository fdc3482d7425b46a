"""verify(): must-defined dataflow over the control graph, and the other invariants by name."""

from __future__ import annotations

import pytest

from ragraph import END, START, RAGraph
from ragraph.errors import WorkflowError


def branchy(write_on_both: bool) -> RAGraph:
    """start -> a -> (b if x) -> c -> end; `c` reads `v`, written by b (and by a when asked)."""
    rag = RAGraph()
    rag.add_input("question")
    rag.add_generation("a", prompt="{question}", output="v" if write_on_both else "x")
    rag.add_generation("b", prompt="{question}", output="v")
    rag.add_generation("c", prompt="{v}", output="answer")
    rag.add_edge(START, "a")
    rag.add_edge("a", "b", when='question == "x"')
    rag.add_edge("a", "c")
    rag.add_edge("b", "c")
    rag.add_edge("c", END)
    return rag


def test_variable_set_on_one_branch_only_may_be_unset():
    with pytest.raises(WorkflowError, match="variable 'v' may be unset when node 'c' runs"):
        branchy(write_on_both=False).verify()


def test_variable_set_on_every_path_is_defined():
    branchy(write_on_both=True).verify()


def test_appending_in_a_loop_needs_no_first_value():
    rag = RAGraph()
    rag.add_input("question")
    rag.add_generation("a", prompt="{question} {notes}", output="notes", append=True)
    rag.add_generation("b", prompt="{notes}", output="answer")
    rag.add_edge(START, "a")
    rag.add_edge("a", "a", max_iters=2)
    rag.add_edge("a", "b")
    rag.add_edge("b", END)
    rag.verify()  # appending to an unset variable starts it


def test_undefined_variable_is_named_with_a_suggestion():
    rag = RAGraph()
    rag.add_input("question")
    rag.add_generation("a", prompt="{questoin}", output="answer")
    rag.add_edge(START, "a")
    rag.add_edge("a", END)
    with pytest.raises(WorkflowError) as caught:
        rag.verify()
    assert "undefined variable 'questoin'" in caught.value.message
    assert caught.value.hint == "did you mean 'question'?" and caught.value.node == "a"


def test_unlocated_errors_carry_the_listing():
    rag = RAGraph()
    rag.add_generation("a", prompt="x", output="answer")
    rag.add_edge(START, "a")
    with pytest.raises(WorkflowError) as caught:
        rag.verify()
    assert "node a: generate" in (caught.value.context or "")


def test_a_graph_without_nodes_is_refused_not_run_forever():
    # START -> END alone: the wavefront executor waited for an answer that never came.
    rag = RAGraph()
    rag.add_input("question")
    rag.add_edge(START, END)
    with pytest.raises(WorkflowError, match="the workflow has no nodes"):
        rag.verify()
