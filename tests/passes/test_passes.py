"""What each pass adds, on builder graphs shaped like the paper's workflows."""

from __future__ import annotations

import pytest

from ragraph import END, START, RAGraph
from ragraph.errors import WorkflowError
from ragraph.ir.edges import Condition, Edge, EdgeKind
from ragraph.ir.listing import node_order
from ragraph.passes import compile
from ragraph.passes.reference import by_variable, walk
from tests.passes.graphs import DOCS_FIRST, hyde, multistep, parallel, selfrag


def kinds_of(compiled, origin):
    """The kinds of origin's chain, in control order."""
    nodes = [compiled.graph.node(nid) for nid in node_order(compiled.graph)]
    return [n.kind for n in nodes if getattr(n, "origin", None) == origin]


def edges(compiled, kind):
    return {(e.src, e.dst) for e in compiled.graph.edges(frozenset({kind}))}


def test_split_stages_makes_contiguous_chains():
    c = compile(hyde(), "split-stages{chunk=8}")
    assert kinds_of(c, "ret") == ["embed-query", "probe", "search-steps", "retrieve-commit"]
    assert kinds_of(c, "answer") == ["prefill", "decode", "finish"]
    assert c.graph.node("answer.decode").chunk == 8
    assert c.graph.node("ret.commit").output == "docs"
    assert "ret" not in c.graph and "answer" not in c.graph


def test_split_stages_options_select_node_kinds():
    c = compile(hyde(), "split-stages{retrieval=false}")
    assert c.graph.node("ret").kind == "retrieve"
    assert c.graph.node("hypo.prefill").kind == "prefill"


def test_broken_chain_is_caught_by_the_sub_stage_check():
    graph = compile(hyde(), "split-stages").graph.copy()
    graph.insert_edge(Edge(src="ret.probe", dst="ret.search", kind=EdgeKind.COND,
                           condition=Condition.parse("len(passage) > 3")))
    with pytest.raises(WorkflowError, match="'ret.probe' \\(probe\\) must lead by one plain edge"):
        graph.verify()


def test_reorder_only_for_a_retrieval_after_an_earlier_one():
    assert "ret.cache" not in compile(hyde(), "split-stages,reorder").graph
    c = compile(multistep(), "split-stages,reorder")
    search = c.graph.node("ret.search")
    assert (search.order, search.history, search.seeded) == ("similarity", ("ret",), True)
    assert kinds_of(c, "ret")[2] == "cache-lookup"
    assert c.graph.node("ret.commit").cache == 20


def test_speculate_adds_verify_commit_and_rollback():
    c = compile(hyde(), "split-stages,speculate")
    assert edges(c, EdgeKind.SPECULATIVE) == {("ret.search", "answer.prefill"),
                                              ("hypo.decode", "ret.embed")}
    assert edges(c, EdgeKind.COMMIT) == {("ret.commit", "answer.verify"),
                                         ("hypo.finish", "ret.verify")}
    assert edges(c, EdgeKind.ROLLBACK) == {("answer.verify", "answer.prefill"),
                                           ("ret.verify", "ret.embed")}
    assert c.graph.node("answer.prefill").guarded


def test_speculate_options_and_commit_point_check():
    c = compile(hyde(), "split-stages,speculate{retrieval=false}")
    assert edges(c, EdgeKind.SPECULATIVE) == {("ret.search", "answer.prefill")}
    graph = c.graph.copy()
    graph.remove_edge(next(iter(graph.edges(frozenset({EdgeKind.COMMIT})))))
    with pytest.raises(WorkflowError, match="needs one commit edge from the last step of 'ret'"):
        graph.verify()


def test_speculation_never_crosses_a_branch():
    c = compile(selfrag(), "split-stages,speculate")
    assert edges(c, EdgeKind.SPECULATIVE) == {("ret.search", "rag.prefill")}


def test_rewire_lets_independent_work_start_early():
    c = compile(parallel(), "split-stages,rewire")
    data = edges(c, EdgeKind.DATA)
    fork, join = "kw.prefill.fork", "answer.finish.join"
    assert (fork, "style.prefill") in data  # needs only the question
    assert ("kw.finish", "ret.embed") in data  # the query embedding starts when its text is final
    assert ("style.finish", "answer.prefill") in data and ("ret.commit", "answer.prefill") in data
    assert ("answer.finish", join) in data
    assert [e.dst for e in c.graph.out_edges(join, control_only=True)] == ["END"]


def test_rewire_keeps_write_after_read_order():
    c = compile(multistep(), "split-stages,rewire")
    assert not edges(c, EdgeKind.DATA)  # every loop-body step waits on the one before


def test_rewire_regions_stop_at_branches_and_keep_conditions():
    c = compile(selfrag(), "rewire")
    assert not edges(c, EdgeKind.DATA)
    cond = [e for e in c.graph.out_edges("judge", control_only=True) if e.condition]
    assert [e.dst for e in cond] == ["ret"]


def test_prefetch_is_a_side_node_fed_by_known_text():
    c = compile(multistep(), "split-stages,prefetch")
    p = c.graph.node("subq.prefetch")
    assert (p.source, p.target, p.incremental) == ("subq", "ret", True)
    assert p.known == ("sub", "question", "notes")  # sub: the previous round's query
    assert edges(c, EdgeKind.PREFETCH) == {("subq.prefill", "subq.prefetch"),
                                           ("subq.prefetch", "ret.search")}
    assert not p.in_control_flow and p.role == "prefetch"
    assert compile(hyde(), "prefetch").graph.node("hypo.prefetch").known == ("question",)


def test_prefix_layout_records_segments_and_never_changes_prompts():
    c = compile(hyde(), "split-stages,prefix-layout")
    layout = c.graph.node("answer.prefill").layout
    assert layout.reusable and layout.docs == ("docs",)
    assert layout.static == "Answer the question using the documents.\nDocuments:\n"
    assert c.graph.node("answer.prefill").prompt.text == DOCS_FIRST
    assert not c.remarks


def test_prefix_layout_remarks_on_question_first_and_rewrite_is_opt_in():
    c = compile(parallel(), "split-stages,prefix-layout")
    (remark,) = c.remarks
    assert remark.node == "answer" and "{question} comes before the documents {docs}" in \
        remark.message and "rewrite=true" in remark.message
    assert not c.graph.node("answer.prefill").layout.reusable
    r = compile(parallel(), "split-stages,prefix-layout{rewrite=true}")
    prompt = r.graph.node("answer.prefill").prompt.text
    assert prompt.index("{docs}") < prompt.index("{question}")
    assert prompt.startswith("Answer the question using the documents.\nDocuments:\n{docs}\n")
    assert r.graph.node("answer.prefill").layout.reusable


def test_every_added_kind_has_a_drawing_role():
    c = compile(multistep())
    roles = {n.kind: n.role for n in c.graph.nodes()}
    assert roles["prefill"] == roles["search-steps"] == "substage"
    assert roles["spec-verify"] == "speculative" and roles["prefetch"] == "prefetch"
    assert compile(parallel(), "split-stages,rewire").graph.node("kw.prefill.fork").role == "control"


def _war() -> RAGraph:
    """g1 reads t before g2 overwrites it: g2 may start early but must not finish first."""
    g = RAGraph("war")
    g.add_input("question")
    g.add_generation("g0", prompt="{question}", output="t")
    g.add_generation("g1", prompt="Use {t}", output="u")
    g.add_generation("g2", prompt="Again {question}", output="t")
    g.add_generation("g3", prompt="{t} {u}", output="answer")
    for a, b in ((START, "g0"), ("g0", "g1"), ("g1", "g2"), ("g2", "g3"), ("g3", END)):
        g.add_edge(a, b)
    return g


def test_rewire_respects_write_after_read_and_the_eager_walk_catches_a_missing_edge():
    c = compile(_war(), "split-stages,rewire")
    data = edges(c, EdgeKind.DATA)
    assert ("g0.prefill.fork", "g2.prefill") in data  # reads only the question
    assert ("g1.prefill", "g2.finish") in data  # WAR on t
    question = {"question": "q"}
    reference = by_variable(walk(c.source, question))
    assert by_variable(walk(c.graph, question, schedule="eager")) == reference
    broken = c.graph.copy()
    broken.remove_edge(next(e for e in broken.edges() if (e.src, e.dst) == ("g1.prefill",
                                                                             "g2.finish")))
    assert by_variable(walk(broken, question, schedule="eager")) != reference
