"""The pass ablation: which pass combinations run, and each pass's contribution."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ragraph.bench.run.ablation import ablation, contributions
from ragraph.bench.run.cells import Cell, CellResult
from ragraph.passes import CANONICAL_ORDER, parse_spec

from .helpers import summary


def test_ablation_runs_O0_each_pass_alone_O2_without_each_pass_and_O2():
    variants = {v.label: v.passes for v in ablation()}
    assert len(variants) == 2 + 2 * len(CANONICAL_ORDER)
    assert variants["-O0"] == "-O0" and variants["-O2"] == "-O2"
    assert variants["only rewire"] == "rewire"
    assert variants["only reorder"] == "split-stages,reorder"  # what it needs comes along
    assert variants["-O2 -reorder"] == "split-stages,speculate,rewire,prefetch"
    assert variants["-O2 -split-stages"] == "rewire,prefetch"  # its dependents go with it
    # prefix-layout is not in -O2: it is measured added to it.
    assert "-O2 -prefix-layout" not in variants and variants["-O2 -rewire"]
    assert variants["-O2 +prefix-layout"] == ("split-stages,reorder,speculate,rewire,prefetch,"
                                              "prefix-layout")
    for spec in variants.values():
        parse_spec(spec)  # every combination is a valid pipeline


def test_contributions_are_ratios_between_the_runs():
    base = CellResult(Cell("irg", 32, None), "-O0", "sim", True,
                      summary(10, 0, 1.0, 1.0, 1.0, 2.0, 1.0), None, 0, None, 0.0)

    def ran(executor: str, throughput_rps: float, p95_s: float) -> CellResult:
        return replace(base, executor=executor, summary=replace(
            base.summary, throughput_rps=throughput_rps, p95_s=p95_s))

    rows = [base, ran("only reorder", 1.5, 1.0), ran("-O2", 3.0, 0.5),
            ran("-O2 -reorder", 2.0, 1.0)]
    found = {c.name: c for c in contributions(rows)}
    reorder = found["reorder"]
    assert reorder.alone_thr == pytest.approx(1.5) and reorder.alone_p95 == pytest.approx(2.0)
    assert reorder.marginal_thr == pytest.approx(1.5) and reorder.marginal_p95 == pytest.approx(2.0)
    assert found["rewire"].alone_thr is None  # not run: no ratio
    assert "reorder" in found["split-stages"].also_dropped


def test_a_pass_outside_o2_counts_what_adding_it_to_o2_gives():
    base = CellResult(Cell("oneshot", 32, None), "-O2", "sim", True,
                      summary(10, 0, 1.0, 2.0, 1.0, 2.0, 1.0), None, 0, None, 0.0)
    added = replace(base, executor="-O2 +prefix-layout",
                    summary=replace(base.summary, throughput_rps=2.2, p95_s=0.8))
    layout = {c.name: c for c in contributions([base, added])}["prefix-layout"]
    assert layout.marginal_thr == pytest.approx(2.2 / 2.0)
    assert layout.marginal_p95 == pytest.approx(2.0 / 0.8)  # lower p95 with it: > 1
    assert layout.also_dropped == ()
