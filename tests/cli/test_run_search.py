"""`ragraph run --k --mode --filter` end to end on a corpus index built with a tiny embedder (its
keyword index with it), the simulated engine; the flags apply to every line of --input, over
each line's own; a `.rag` retrieve node's `mode` option parses, prints and is checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragraph.cli.main import main
from ragraph.dsl import parse, to_rag
from ragraph.errors import WorkflowError
from tests.cli.test_run import WORKFLOWS, corpus_index


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> Path:
    from tests.retrieval.tiny_models import tiny_model

    root = tmp_path_factory.mktemp("run-search")
    return corpus_index(root, 3, "--nlist", "2", "--embedder", str(tiny_model(root / "model")))


def run(index: Path, *flags: str, question: str = "Which game has 64 squares?") -> list[str]:
    argv = ["run", str(WORKFLOWS / "oneshot.rag"), "-q", question, "--engine", "sim",
            "--index", str(index), "--nprobe", "2", "--verbose", *flags]
    assert main(argv) == 0
    return argv


def passages(out: str) -> list[str]:
    """The titles of the passages `--verbose` lists."""
    lines = out.split("passages", 1)[1].split("path", 1)[0].splitlines()
    return [line.split("] ", 1)[1].split(":", 1)[0] for line in lines if "] " in line]


def test_k_mode_and_filter_flags(index, capsys):
    run(index, "--k", "2", "--mode", "hybrid")
    two = passages(capsys.readouterr().out)
    # The tiny embedder ranks at random; "64 squares" are keywords of the chess passages only.
    assert len(two) == 2 and "Chess" in two
    run(index, "--k", "4", "--filter", "title=Glacier")
    assert passages(capsys.readouterr().out) == ["Glacier"] * 3  # all there are, none else


def test_flags_apply_to_every_input_line(index, tmp_path):
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text('{"id": "a", "question": "violin bow"}\n'
                   '{"id": "b", "question": "ice", "k": 3}\n', encoding="utf-8")
    assert main(["run", str(WORKFLOWS / "oneshot.rag"), "--input", str(src), "--output",
                 str(out), "--engine", "sim", "--index", str(index), "--nprobe", "2",
                 "--k", "1"]) == 0
    rows = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert len(rows["a"]["passages"]) == 1 and len(rows["b"]["passages"]) == 1


@pytest.mark.parametrize("argv, message", [
    (["--k", "0"], "k: must be an integer from 1 to 1000"),
    (["--filter", "title"], "--filter: must be FIELD=VALUE"),
])
def test_bad_flags_name_themselves(argv, message, capsys):
    code = main(["run", str(WORKFLOWS / "oneshot.rag"), "-q", "x", "--engine", "sim", *argv])
    assert code == 2 and message in capsys.readouterr().err


def test_a_retrieve_node_takes_a_mode():
    text = ('workflow w\ninput question\n'
            'retrieve search -> docs (topk = 3, mode = "hybrid"):\n    query = question\n'
            'generate answer -> answer: "{docs} {question}"\n'
            'flow:\n    START -> search -> answer -> END\n')
    graph = parse(text)
    assert graph.node("search").mode == "hybrid"
    assert 'mode = "hybrid"' in to_rag(graph) and parse(to_rag(graph)) == graph
    with pytest.raises(WorkflowError, match="mode must be one of dense, hybrid, got 'bm25'"):
        parse(text.replace('"hybrid"', '"bm25"'))
