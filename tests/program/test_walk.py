"""The program carries what execution needs, and one walk steps every executor's requests: a
rewired region's members start as their DATA edges allow or in control order, the walker's
choice, and running a program never reads the builder's graph."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest

from ragraph.ir.graph import RAGraph
from ragraph.ir.nodes import END, START, Merge
from ragraph.ir.values import GeneratedText, Value
from ragraph.passes import compile
from ragraph.passes.reference import FakeEngines, walk
from ragraph.program.interpret import Interpreter, run_sync
from ragraph.program.program import GenerationChain, RetrievalChain
from ragraph.program.walk import Walk
from tests.passes.graphs import BUILDERS


@dataclass
class _Request:
    variables: dict[str, Value]
    node: str = START
    loop_counts: Counter[int] = field(default_factory=Counter)
    path: list[str] = field(default_factory=list)
    rendered: dict[str, Any] = field(default_factory=dict)


class _Fake(Interpreter[_Request, str]):
    engines = FakeEngines()

    async def complete(self, chain, req, prompt, branch):  # noqa: ANN001
        return GeneratedText(self.engines.generate(prompt), 1.0)

    async def search(self, chain, req, query, branch):  # noqa: ANN001
        return self.engines.retrieve(query, chain.topk)


def _request(graph: RAGraph) -> _Request:
    defaults = {i.name: i.default for i in graph.inputs.values() if i.default is not None}
    return _Request({**defaults, "question": "Who wrote the first compiler?"})


def test_each_unit_carries_its_chain_and_successors():
    program = compile(BUILDERS["hyde"](), "-O2").program
    for uid, unit in program.units.items():
        assert unit.node is program.graph.node(uid)
        chain = program.generations.get(unit.origin) or program.retrievals.get(unit.origin)
        if isinstance(unit.node, Merge):
            assert unit.chain is unit.node
        else:
            assert unit.chain is chain
        assert [s.edge for s in unit.successors] == program.graph.out_edges(uid,
                                                                            control_only=True)
    assert {u.kind for u in program.units.values() if isinstance(u.chain, GenerationChain)} \
        >= {"prefill", "decode", "finish"}
    assert {u.kind for u in program.units.values() if isinstance(u.chain, RetrievalChain)} \
        >= {"embed-query", "search-steps", "retrieve-commit"}


def test_loop_counts_are_keyed_by_the_loop_number_lowering_gave():
    program = compile(BUILDERS["multistep"](), "-O0").program
    loops = [s.loop for u in program.units.values() for s in u.successors if s.loop is not None]
    assert sorted(loops) == list(range(len(loops))) and loops
    req = _request(program.graph)
    run_sync(_Fake(program).run(req))
    assert set(req.loop_counts) <= set(loops)


def test_a_region_is_the_walkers_choice():
    """At a fork, the wavefront's walk starts every member whose DATA predecessors are done;
    the control-order walk enters the fork's one control successor."""
    program = compile(BUILDERS["parallel"](), "split-stages,rewire").program
    fork = next(u for u in program.units.values() if u.region is not None)
    region = fork.region
    assert region is not None
    ready = [m for m in region.members if region.data_preds[m] <= {fork.id}]
    assert len(ready) > 1  # independent work: the case a region is for
    both = [Walk(program, _request(program.graph), regions=r) for r in (True, False)]
    assert both[0].completed(fork.id) == ready
    (after,) = fork.successors
    assert both[1].completed(fork.id) == [after.edge.dst]


@pytest.mark.parametrize("name", sorted(BUILDERS))
@pytest.mark.parametrize("eager", [False, True])
def test_running_a_program_never_reads_its_graph(name, eager, monkeypatch):
    """Lowering attached every edge and chain to its unit (as LangGraph's compile() does), so
    a run reads no networkx graph."""
    compiled = compile(BUILDERS[name](), "-O2")
    expected = {e.var: e.value for e in walk(compiled.graph, _request(compiled.graph).variables)}

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the graph was read at run time")

    for method in ("node", "out_edges", "in_edges", "nodes", "control_graph"):
        monkeypatch.setattr(RAGraph, method, refuse)
    req = _request(compiled.graph)
    fake = _Fake(compiled.program)
    fake.eager = eager
    run_sync(fake.run(req))
    assert req.node == END
    assert {k: req.variables[k] for k in expected} == expected
