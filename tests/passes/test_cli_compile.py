"""`ragraph compile`: the listing on stdout; remarks, per-pass listings and timings on stderr."""

from __future__ import annotations

import json

from ragraph.cli.main import main
from ragraph.ir.serialize import to_json
from tests.passes.graphs import parallel
from tests.passes.test_golden import ROOT

IRG = str(ROOT / "workflows" / "irg.rag")


def test_compile_prints_the_o2_listing(capsys):
    assert main(["compile", IRG]) == 0
    out = capsys.readouterr().out
    assert out.startswith("workflow irg\n")
    assert "node search.search: search-steps" in out and "speculative -> answer.prefill" in out
    assert "node answer.prefetch: prefetch" in out


def test_o0_prints_the_workflow_as_written(capsys):
    assert main(["compile", IRG, "-O0"]) == 0
    out = capsys.readouterr().out
    assert "node search: retrieve" in out and "search.embed" not in out


def test_print_after_each_and_time_passes(capsys):
    assert main(["compile", IRG, "--passes", "split-stages,speculate{retrieval=false}",
                 "--print-after-each", "--time-passes"]) == 0
    err = capsys.readouterr().err
    assert "// after split-stages (changed)\nworkflow irg" in err
    assert "// after speculate{retrieval=false} (changed)" in err
    assert "split-stages " in err.split("pass ")[-1] and "total" in err


def test_remarks_go_to_stderr(tmp_path, capsys):
    path = tmp_path / "parallel.json"
    path.write_text(to_json(parallel()), encoding="utf-8")
    # prefix-layout, which remarks on layouts, runs by name (it is not in -O2).
    assert main(["compile", str(path), "--passes", "split-stages,prefix-layout"]) == 0
    captured = capsys.readouterr()
    assert "remark [prefix-layout] answer: {question} comes before the documents" in captured.err
    assert "remark" not in captured.out


def test_json_output_is_the_compiled_graph(capsys):
    assert main(["compile", IRG, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert any(n["kind"] == "spec-verify" for n in data["nodes"])


def test_bad_spec_is_a_clean_error(capsys):
    assert main(["compile", IRG, "--passes", "split-stages,speculat"]) == 2
    err = capsys.readouterr().err
    assert "unknown pass 'speculat' (did you mean 'speculate'?)" in err
    assert "Traceback" not in err


def test_missing_file_is_a_clean_error(capsys):
    assert main(["compile", "nope.rag"]) == 2
    assert "no workflow file 'nope.rag'" in capsys.readouterr().err
