"""Self-RAG is the shipped workflow where -O2's rewire acts: its grounded answer reads only the
question and the passages, as its [IsRel] critique does (Self-RAG's Algorithm 1 predicts both
for each passage), so the answer's prefill starts while the critique still runs, and every route
answers as -O0 does under every pass combination."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragraph import dsl
from ragraph.ir.edges import EdgeKind
from ragraph.passes import compile, parse_spec
from ragraph.runtime.llm.sim.engine import SimEngine
from ragraph.runtime.trace import Tracer
from tests.passes.test_properties import SPECS
from tests.runtime import fakes
from tests.runtime.test_units import FAST, run
from tests.workflows import routes
from tests.workflows.scripted import ScriptedEngine

ROOT = Path(__file__).resolve().parents[2]
WITHOUT_REWIRE = ",".join(p.spec() for p in parse_spec("-O2") if p.name != "rewire")


@pytest.fixture(scope="module")
def search():
    return fakes.random_search()


def selfrag():
    return dsl.load(ROOT / "workflows" / "selfrag.rag")


def data_sources(graph, node: str) -> set[str]:
    return {e.src for e in graph.in_edges(node) if e.kind is EdgeKind.DATA}


def test_o2_lets_the_grounded_answer_wait_only_for_the_passages():
    compiled = compile(selfrag(), "-O2")
    assert "rewire" in compiled.changed_by()
    assert data_sources(compiled.graph, "grounded.prefill") == {"search.commit"}
    # [IsSup] reads the answer, so it still waits for it; the choice waits for both critiques.
    assert data_sources(compiled.graph, "support.prefill") == {"grounded.finish"}
    assert {"relevance.finish", "support.finish"} <= data_sources(compiled.graph,
                                                                  "support.finish.join")


def test_without_rewire_the_answer_waits_for_the_critique():
    graph = compile(selfrag(), WITHOUT_REWIRE).graph
    assert not any(n.kind == "fork" for n in graph.nodes())
    assert not data_sources(graph, "grounded.prefill")


def starts_before_critique_ends(trace: Tracer) -> bool:
    spans = {(s.track, s.name): s for s in trace.spans()}
    return any(spans[(t, "unit grounded.prefill")].start < spans[(t, "unit relevance.finish")].end
               for t, name in spans if name == "unit relevance.finish")


def test_the_answer_runs_beside_the_critique_only_with_rewire(search):
    questions = [f"What is notable about topic {i}?" for i in range(8)]
    o2, with_rewire = run(selfrag(), SimEngine(FAST), search, "-O2", questions)
    without, no_rewire = run(selfrag(), SimEngine(FAST), search, WITHOUT_REWIRE, questions)
    assert o2 == without
    assert starts_before_critique_ends(with_rewire)
    assert not starts_before_critique_ends(no_rewire)


def test_every_pass_combination_answers_every_route_as_o0(search):
    questions = routes.questions(2 * len(routes.KINDS))
    reference, _ = run(selfrag(), ScriptedEngine(routes.script), search, "-O0", questions)
    for spec in ("-O2", WITHOUT_REWIRE, *SPECS):
        got, _ = run(selfrag(), ScriptedEngine(routes.script), search, spec, questions)
        assert got == reference, f"selfrag: {spec} differs from -O0"
