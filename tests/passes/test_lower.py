"""Lowering is compile()'s last step: the compiled workflow carries the programs the executors
run, so no executor lowers (or reads a graph back into chains) at run time."""

from __future__ import annotations

import pytest

from ragraph.passes import compile
from tests.passes.graphs import hyde, multistep


@pytest.mark.parametrize("passes", ["-O0", "-O2"])
def test_compile_returns_the_program_of_its_graph_and_of_the_source(passes):
    compiled = compile(multistep(), passes)
    assert compiled.program.graph is compiled.graph
    assert str(compiled.source_program.graph) == str(compiled.source)
    for program in (compiled.program, compiled.source_program):
        assert set(program.retrievals) == {"ret"}
        assert set(program.generations) == {"subq", "note", "final"}
        assert program.last["ret"] in {n.id for n in program.graph.nodes()}


def test_an_unsplit_node_is_a_one_unit_chain():
    """-O0 lowers too: each original node is the head and the last unit of its own chain."""
    program = compile(hyde(), "-O0").program
    assert program.heads == {"hypo", "ret", "answer"}
    assert dict(program.last) == {"hypo": "hypo", "ret": "ret", "answer": "answer"}
    assert not program.retrievals["ret"].stepwise


def test_the_optimized_program_splits_what_the_source_program_runs_whole():
    compiled = compile(hyde(), "-O2")
    assert compiled.program.retrievals["ret"].stepwise
    assert compiled.program.last["ret"] != "ret"  # its commit sub-stage assigns the output
    assert not compiled.source_program.retrievals["ret"].stepwise
    assert compiled.source_program.last["ret"] == "ret"
