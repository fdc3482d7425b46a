"""`ragraph show` end to end: formats, files, passes, --compare, and located errors (exit 2)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ragraph.cli.main import main

pytest.importorskip("ragraph.dsl")

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / "workflows").glob("*.rag"))
MULTISTEP = '''\
# Question decomposition, for the drawing tests.
workflow multistep
input question
input notes = ""

generate decompose -> subq: """
    Question: {question}
    Known so far: {notes}
    Next sub-question (or <none>):
    """
retrieve search -> docs (topk = 3): query = subq
generate note -> notes += : "{docs}\\nSub-question: {subq}\\nAnswer:"
generate answer -> answer: "{notes}\\nQuestion: {question}\\nAnswer:"

flow:
    start -> decompose
    decompose -> answer if subq contains "<none>"
    decompose -> search -> note
    note -> decompose loop max 4
    note -> answer -> end
'''
NODES = ("START", "decompose", "search", "note", "answer", "END")


@pytest.fixture
def rag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "multistep.rag"
    path.write_text(MULTISTEP)
    return path


def show(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["show", *map(str, args)])
    out, err = capsys.readouterr()
    return rc, out, err


def test_dot_prints_a_digraph_with_every_node_and_edge(rag: Path, capsys) -> None:
    rc, out, _ = show(capsys, rag, "--format", "dot")
    assert rc == 0 and out.startswith('digraph "multistep" {')
    for nid in NODES:
        assert f'"{nid}" [' in out
    for src, dst in (("decompose", "answer"), ("note", "decompose"), ("answer", "END")):
        assert f'"{src}" -> "{dst}"' in out


def test_mermaid_prints_a_flowchart(rag: Path, capsys) -> None:
    rc, out, _ = show(capsys, rag, "--format", "mermaid")
    assert rc == 0 and out.startswith("flowchart TB")


def test_html_writes_one_offline_file(rag: Path, capsys) -> None:
    rc, out, _ = show(capsys, rag, "--format", "html")
    assert rc == 0 and out.strip() == "multistep.html"
    page = Path("multistep.html").read_text()
    assert "<svg" in page and not re.search(r"https?://", page)


def test_tree_is_the_default(rag: Path, capsys) -> None:
    rc, out, _ = show(capsys, rag)
    assert rc == 0 and "decompose" in out and "subq contains" in out and "\u2264" in out


def test_output_option_writes_text_formats_too(rag: Path, capsys, tmp_path: Path) -> None:
    rc, out, _ = show(capsys, rag, "--format", "mermaid", "--output", tmp_path / "m.mmd")
    assert rc == 0 and (tmp_path / "m.mmd").read_text().startswith("flowchart")


def test_passes_draw_the_optimized_graph(rag: Path, capsys) -> None:
    rc, out, _ = show(capsys, rag, "--format", "dot", "-O2")
    assert rc == 0 and "peripheries=2" in out  # sub-stages
    _, plain, _ = show(capsys, rag, "--format", "dot", "-O0")
    assert "peripheries=2" not in plain.split('"legend"')[0]


def test_compare_draws_original_and_optimized(rag: Path, capsys) -> None:
    rc, out, _ = show(capsys, rag, "--format", "mermaid", "--compare")
    assert rc == 0 and 'subgraph p0g["original"]' in out and 'p1g["optimized' in out
    rc, out, _ = show(capsys, rag, "--format", "html", "--compare", "--passes", "split-stages")
    page = Path("multistep.html").read_text()
    assert rc == 0 and page.count('<section class="panel">') == 2 and "legend" in page


def test_missing_file_is_a_clean_error(tmp_path: Path, capsys) -> None:
    rc, _, err = show(capsys, tmp_path / "nope.rag")
    assert rc == 2 and "nope.rag" in err and "Traceback" not in err


def test_syntax_error_is_located(rag: Path, capsys) -> None:
    rag.write_text(MULTISTEP.replace("note -> answer -> end", "note -> -> end"))
    rc, _, err = show(capsys, rag, "--format", "dot")
    assert rc == 2 and re.search(r"multistep\.rag:\d+:\d+", err)


def test_bad_pass_spec_is_a_clean_error(rag: Path, capsys) -> None:
    rc, _, err = show(capsys, rag, "--passes", "no-such-pass")
    assert rc == 2 and "no-such-pass" in err


@pytest.mark.parametrize("fmt", ["tree", "dot", "mermaid", "html"])
@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.stem)
def test_every_workflow_draws(path: Path, fmt: str, capsys, tmp_path: Path) -> None:
    for extra in ([], ["-O2", "--compare"]):
        rc, _, err = show(capsys, path, "--format", fmt, "--output", tmp_path / f"x.{fmt}", *extra)
        assert rc == 0, err


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz `dot` is not installed")
@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.stem)
def test_graphviz_accepts_every_workflow(path: Path, capsys) -> None:
    rc, out, _ = show(capsys, path, "--format", "dot", "-O2", "--compare")
    done = subprocess.run(["dot", "-Tsvg"], input=out.encode(), capture_output=True, timeout=60,
                          check=False)
    assert rc == 0 and done.returncode == 0, done.stderr.decode()
