"""Pass specs, the pipeline's verification and failure reports, and the compiled artifact."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, dataclass
from typing import ClassVar

import pytest

from ragraph.errors import WorkflowError
from ragraph.ir.edges import Edge, EdgeKind
from ragraph.passes import (
    CANONICAL_ORDER,
    O2,
    PassContext,
    PassError,
    compile,
    parse_spec,
    spec_text,
)
from ragraph.passes.base import Pass
from ragraph.passes.pipeline import run_pipeline
from ragraph.passes.speculate import Speculate
from ragraph.passes.split_stages import SplitStages
from tests.passes.graphs import hyde, multistep


def test_levels():
    assert parse_spec("-O0") == ()
    assert CANONICAL_ORDER == ("split-stages", "reorder", "speculate", "rewire", "prefetch",
                               "prefix-layout")
    # prefix-layout measured no gain on any engine (docs/benchmarks/ablation.md): by name only.
    assert [p.name for p in parse_spec("-O2")] == list(O2) == list(CANONICAL_ORDER[:-1])
    assert parse_spec("split-stages,prefix-layout")[-1].name == "prefix-layout"  # by name


def test_options_are_typed_and_round_trip():
    passes = parse_spec(" split-stages{chunk=8}, speculate{retrieval=false} ,rewire")
    assert passes == (SplitStages(chunk=8), Speculate(retrieval=False), parse_spec("rewire")[0])
    assert spec_text(passes) == "split-stages{chunk=8},speculate{retrieval=false},rewire"
    assert parse_spec(spec_text(passes)) == passes


@pytest.mark.parametrize(("spec", "message"), [
    ("split-stage", "unknown pass 'split-stage' (did you mean 'split-stages'?)"),
    ("split-stages{chunks=4}", "pass 'split-stages' has no option 'chunks' (did you mean 'chunk'?)"),
    ("split-stages{chunk=many}", "option 'chunk' is an integer, got 'many'"),
    ("split-stages{chunk=0}", "option 'chunk' must be a positive integer, got 0"),
    ("split-stages,speculate{retrieval=no}", "option 'retrieval' is true or false, got 'no'"),
    ("split-stages{chunk}", "option 'chunk' needs a value"),
    ("speculate", "pass 'speculate' needs 'split-stages' to run before it; try "
                  "'split-stages,speculate'"),
    ("split-stages,rewire,speculate", "pass 'speculate' must come before 'rewire'"),
    ("rewire,rewire", "pass 'rewire' appears twice"),
    ("split-stages{chunk=4", "cannot parse pass spec"),
])
def test_spec_errors_name_the_pass_and_option(spec, message):
    with pytest.raises(PassError) as err:
        parse_spec(spec)
    assert message in str(err.value)


@dataclass(frozen=True)
class _Breaks(Pass):
    """Leaves a node with two unconditional next edges: verify must catch it."""

    name: ClassVar[str] = "breaks"

    def apply(self, graph, ctx) -> bool:
        graph.insert_edge(Edge(src="hypo.prefill", dst="END", kind=EdgeKind.NEXT))
        return True


def test_failing_pass_is_named_with_the_passes_before_it():
    graph = hyde()
    with pytest.raises(PassError) as err:
        run_pipeline(graph, (SplitStages(), _Breaks()), PassContext(original=graph))
    text = str(err.value)
    assert "pass 'breaks' failed (after split-stages)" in text
    assert "'hypo.prefill' has 2 unconditional next edges" in text
    assert isinstance(err.value.__cause__, WorkflowError)


def test_compile_returns_an_immutable_artifact_and_leaves_the_input_alone():
    graph = multistep()
    before = str(graph)
    compiled = compile(graph)
    assert str(graph) == before
    assert compiled.graph.frozen and compiled.source.frozen
    assert str(compiled.source) == before
    assert compiled.passes == ",".join(O2)
    assert [s.name for s in compiled.stats] == list(O2)
    # Every step of multistep's loop body needs its predecessor's result: nothing to rewire.
    assert compiled.changed_by() == tuple(n for n in O2 if n != "rewire")
    with pytest.raises(FrozenInstanceError):
        compiled.passes = "-O0"  # type: ignore[misc]
    with pytest.raises(WorkflowError, match="read-only"):
        compiled.graph.remove_node("subq.prefill")


def test_o0_is_the_source_graph():
    compiled = compile(hyde(), "-O0")
    assert compiled.passes == "-O0" and compiled.stats == ()
    assert str(compiled.graph) == str(compiled.source)


def test_after_each_hook_sees_every_pass_with_its_timing():
    seen = []
    compile(hyde(), after_each=lambda stat, g: seen.append((stat.name, stat.changed, str(g))))
    assert [s[0] for s in seen] == list(O2)
    assert "hypo.prefill" in seen[0][2] and "ret.verify" not in seen[0][2]
    assert "ret.verify" in seen[2][2]


def test_invalid_input_graph_is_reported_before_any_pass():
    graph = hyde()
    graph.add_generation("orphan", prompt="{question}", output="x")
    with pytest.raises(WorkflowError, match="'orphan' has no unconditional next edge"):
        compile(graph)
