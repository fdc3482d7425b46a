"""Step-back prompting is the shipped workflow where -O2's rewire acts: the question's retrieval
reads nothing the step-back question writes, so it runs while that question is generated, and
every route answers as -O0 does under every pass combination."""

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


def stepback():
    return dsl.load(ROOT / "workflows" / "stepback.rag")


def data_sources(graph, node: str) -> set[str]:
    return {e.src for e in graph.in_edges(node) if e.kind is EdgeKind.DATA}


def test_o2_lets_the_questions_retrieval_wait_for_nothing():
    compiled = compile(stepback(), "-O2")
    assert "rewire" in compiled.changed_by()
    fork = next(n.id for n in compiled.graph.nodes() if n.kind == "fork")
    assert data_sources(compiled.graph, "search.embed") == {fork}
    # The step-back question's retrieval still waits for it, and the answer for both.
    assert data_sources(compiled.graph, "background.embed") == {"abstract.finish"}


def test_without_rewire_the_retrieval_waits_for_the_step_back_question():
    graph = compile(stepback(), WITHOUT_REWIRE).graph
    assert not any(n.kind == "fork" for n in graph.nodes())
    assert not data_sources(graph, "search.embed")


def searches_while_abstracting(trace: Tracer) -> bool:
    spans = {(s.track, s.name): s for s in trace.spans()}
    return any(spans[(t, "unit search.embed")].start < spans[(t, "unit abstract.finish")].end
               for t, name in spans if name == "unit abstract.finish")


def test_the_search_runs_beside_the_generation_only_with_rewire(search):
    questions = [f"What is notable about topic {i}?" for i in range(8)]
    o2, with_rewire = run(stepback(), SimEngine(FAST), search, "-O2", questions)
    without, no_rewire = run(stepback(), SimEngine(FAST), search, WITHOUT_REWIRE, questions)
    assert o2 == without
    assert searches_while_abstracting(with_rewire)
    assert not searches_while_abstracting(no_rewire)


def test_every_pass_combination_answers_every_route_as_o0(search):
    questions = routes.questions(2 * len(routes.KINDS))
    reference, _ = run(stepback(), ScriptedEngine(routes.script), search, "-O0", questions)
    for spec in ("-O2", WITHOUT_REWIRE, *SPECS):
        got, _ = run(stepback(), ScriptedEngine(routes.script), search, spec, questions)
        assert got == reference, f"stepback: {spec} differs from -O0"
