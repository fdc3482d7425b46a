"""Every shipped workflow: golden listing, `.rag` and JSON round trips, the run-time contract, and
`ragraph check` over the files."""

from __future__ import annotations

import os

import pytest

from ragraph.cli.main import main
from ragraph.dsl import load, parse, to_rag
from ragraph.ir import EdgeKind, Generate
from ragraph.ir.serialize import from_json, to_json
from tests.dsl.paths import GOLDEN, WORKFLOWS

# RAGRAPH_UPDATE_GOLDEN=1 rewrites the expected listings from the current output.
UPDATE = os.environ.get("RAGRAPH_UPDATE_GOLDEN") == "1"
EXPECTED = {"adaptive", "flare", "hyde", "ircot", "irg", "multistep", "oneshot", "oneshot_chat",
            "ragfusion", "recomp", "selfrag", "stepback", "subquestions"}
by_stem = pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.stem)


def test_all_workflows_present():
    assert {p.stem for p in WORKFLOWS} == EXPECTED


@by_stem
def test_golden_listing(path):
    listing = str(load(path))
    golden = GOLDEN / f"{path.stem}.txt"
    if UPDATE:
        golden.write_text(listing, encoding="utf-8")
    assert golden.exists(), f"no golden listing for {path.name}; run with RAGRAPH_UPDATE_GOLDEN=1"
    assert listing == golden.read_text(encoding="utf-8")


@by_stem
def test_rag_round_trip(path):
    graph = load(path)
    text = to_rag(graph)
    again = parse(text, file=f"printed {path.name}")
    assert again == graph
    assert str(again) == str(graph)
    assert to_rag(again) == text  # printing is a fixed point


@by_stem
def test_json_round_trip(path):
    graph = load(path)
    again = from_json(to_json(graph))
    assert again == graph
    assert str(again) == str(graph)


@by_stem
def test_takes_question_and_writes_answer(path):
    graph = load(path)
    assert "question" in graph.inputs
    assert any(isinstance(n, Generate) and n.output == "answer" for n in graph.nodes())


@by_stem
def test_opens_with_a_citation(path):
    head = path.read_text(encoding="utf-8").splitlines()[0]
    assert head.startswith("# ") and any(str(year) in head for year in range(2020, 2026))


def test_loops_are_bounded_where_the_papers_iterate():
    loops = {p.stem: [e for e in load(p).edges() if e.kind == EdgeKind.LOOP] for p in WORKFLOWS}
    assert [e.max_iters for e in loops["irg"]] == [2]  # three rounds in all
    assert loops["multistep"] and loops["ircot"] and loops["adaptive"]
    # FLARE regenerates a low-confidence sentence once; the answers here are one sentence long.
    assert not loops["oneshot"] and not loops["hyde"] and not loops["recomp"] and not loops["flare"]
    assert not loops["ragfusion"] and not loops["subquestions"]  # fan-out, not iteration
    flare = load(next(p for p in WORKFLOWS if p.stem == "flare"))
    assert flare.node("lookahead").sampling.logprobs  # the confidence test reads its logprobs
    assert any("confidence(answer)" in e.condition.source for e in flare.edges() if e.condition)


def test_check_accepts_every_workflow(capsys):
    assert main(["check", *map(str, WORKFLOWS)]) == 0
    out = capsys.readouterr().out
    assert out.count("ok ") == len(WORKFLOWS)
    assert f"ok {WORKFLOWS[0]} (" in out


def test_check_reports_a_broken_file(tmp_path, capsys):
    bad = tmp_path / "bad.rag"
    bad.write_text('input question\n\ngenerate a -> answer: "{questoin}"\n', encoding="utf-8")
    assert main(["check", str(bad), str(WORKFLOWS[0])]) == 2
    captured = capsys.readouterr()
    assert f"{bad}:3:25: error: undefined variable 'questoin'" in captured.err
    assert "^" in captured.err and "did you mean 'question'?" in captured.err
    assert "Traceback" not in captured.err + captured.out
    assert f"ok {WORKFLOWS[0]}" in captured.out  # the other files are still checked


def test_check_reports_a_missing_file(tmp_path, capsys):
    assert main(["check", str(tmp_path / "nope.rag")]) == 2
    assert "cannot read workflow" in capsys.readouterr().err
