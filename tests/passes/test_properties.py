"""Properties over the builder workflows and seeded random valid graphs: every pass keeps the graph
valid, applying a pass again changes nothing, and the optimized graph with every speculative edge
declined computes what the -O0 graph computes, in the same order (and, run in the order its DATA
edges allow, the same values for every variable)."""

from __future__ import annotations

import pytest

from ragraph.ir.serialize import from_json, to_json
from ragraph.passes import PassContext, compile, parse_spec
from ragraph.passes.reference import by_variable, walk
from tests.passes.graphs import BUILDERS
from tests.passes.randgraphs import random_graph

SEEDS = range(30)
# Each pass alone (with what it requires), and every prefix of -O2.
SPECS = (
    "split-stages", "split-stages,reorder", "split-stages,reorder,speculate",
    "split-stages,reorder,speculate,rewire", "split-stages,reorder,speculate,rewire,prefetch",
    "-O2", "rewire", "prefetch", "split-stages,speculate{generation=false}",
    "split-stages{retrieval=false},rewire,prefetch", "split-stages,prefix-layout{rewrite=true}",
)
QUESTIONS = ("who wrote hamlet", "a", "why is the sky blue and what is rayleigh scattering")


def graphs():
    yield from ((name, build()) for name, build in BUILDERS.items())
    yield from ((f"random{s}", random_graph(s)) for s in SEEDS)


CASES = list(graphs())


@pytest.mark.parametrize(("name", "graph"), CASES, ids=[c[0] for c in CASES])
def test_passes_keep_the_graph_valid_and_are_idempotent(name, graph):
    for spec in SPECS:
        compiled = compile(graph, spec)  # verifies after every pass
        again = compiled.graph.copy()
        for p in parse_spec(spec):
            ctx = PassContext(original=compiled.source)
            assert not p.apply(again, ctx), f"{p.spec()} changed {name} again (after {spec})"
        assert str(again) == str(compiled.graph)


@pytest.mark.parametrize(("name", "graph"), CASES, ids=[c[0] for c in CASES])
def test_o2_with_speculation_declined_computes_the_o0_answers(name, graph):
    compiled = compile(graph, "-O2")
    for question in QUESTIONS:
        reference = walk(compiled.source, {"question": question})
        assert walk(compiled.graph, {"question": question}) == reference
        eager = walk(compiled.graph, {"question": question}, schedule="eager")
        assert by_variable(eager) == by_variable(reference)


@pytest.mark.parametrize(("name", "graph"), CASES[:4] + CASES[10:14],
                         ids=[c[0] for c in CASES[:4] + CASES[10:14]])
def test_compiled_graphs_round_trip_through_json(name, graph):
    optimized = compile(graph).graph
    assert from_json(to_json(optimized)) == optimized
