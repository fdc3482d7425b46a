"""Golden listings: every workflow in workflows/ (and the builder graphs of graphs.py) after each
pass in the canonical order, with the remarks; -O2 is every pass but the last (prefix-layout), so
the listing after prefetch is -O2's. Regenerate with RAGRAPH_UPDATE_GOLDEN=1 and review the diff."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ragraph import dsl
from ragraph.passes import CANONICAL_ORDER, O2, compile
from ragraph.passes.reference import by_variable, walk
from tests.passes.graphs import BUILDERS

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).with_name("golden")
WORKFLOWS = sorted((ROOT / "workflows").glob("*.rag"))


def transcript(graph) -> str:
    """-O0, then the listing after each pass, then the remarks."""
    parts = [f"// -O0\n{graph}"]
    compiled = compile(graph, ",".join(CANONICAL_ORDER), after_each=lambda stat, g: parts.append(
        f"// after {stat.spec}{'' if stat.changed else ' (unchanged)'}\n{g}"))
    parts.append("// remarks\n" + "".join(f"{r}\n" for r in compiled.remarks))
    return "\n".join(parts)


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("RAGRAPH_UPDATE_GOLDEN") == "1":
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"no golden file {path}; run with RAGRAPH_UPDATE_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8"), (
        f"{name}: listing differs from {path}; if intended, regenerate with RAGRAPH_UPDATE_GOLDEN=1")


def test_every_workflow_is_covered():
    assert WORKFLOWS, "workflows/*.rag missing"


def test_o2_is_the_listing_before_the_last_pass():
    assert O2 == CANONICAL_ORDER[:-1]  # else the goldens no longer hold -O2's listing


@pytest.mark.parametrize("path", WORKFLOWS, ids=[p.stem for p in WORKFLOWS])
def test_workflow_golden(path):
    check_golden(path.stem, transcript(dsl.load(path)))


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_builder_golden(name):
    check_golden(f"builder-{name}", transcript(BUILDERS[name]()))


@pytest.mark.parametrize("path", WORKFLOWS, ids=[p.stem for p in WORKFLOWS])
def test_workflow_o2_with_speculation_declined_matches_o0(path):
    compiled = compile(dsl.load(path))
    inputs = {"question": "who wrote the opera carmen"}
    reference = walk(compiled.source, inputs)
    assert walk(compiled.graph, inputs) == reference
    assert by_variable(walk(compiled.graph, inputs, schedule="eager")) == by_variable(reference)
