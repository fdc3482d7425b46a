"""A file that defines no node is not a workflow: every command that reads one refuses it at
file:1:1 (it used to pass `check` as "ok (0 nodes)" and `run` on it never finished). A workflow
whose start has no way to end is refused the same way, before any engine starts."""

from __future__ import annotations

import pytest

from ragraph.cli.main import main
from ragraph.dsl import load
from ragraph.errors import WorkflowError
from ragraph.ir import END, START, RAGraph

EMPTY = {
    "empty": "",
    "whitespace only": "   \n\t\n\n",
    "comments only": "# a workflow, one day\n# not yet\n",
    "an input and nothing else": "workflow later\ninput question\n",
}
MESSAGE = "no workflow: the file defines no nodes"


@pytest.mark.parametrize("source", EMPTY.values(), ids=EMPTY.keys())
def test_a_file_without_nodes_is_an_error_at_its_first_line(source, tmp_path):
    path = tmp_path / "empty.rag"
    path.write_text(source, encoding="utf-8")
    with pytest.raises(WorkflowError) as caught:
        load(path)
    assert str(caught.value).startswith(f"{path}:1:1: error: {MESSAGE}")
    assert caught.value.hint and "generate" in caught.value.hint


# serve reads its files before it opens an engine or binds a port; --engine sim keeps it so.
COMMANDS = {
    "check": ["check"],
    "compile": ["compile"],
    "show": ["show"],
    "run": ["run", "-q", "x", "--engine", "sim"],
    "serve": ["serve", "--engine", "sim", "--port", "0"],
}


@pytest.mark.parametrize("argv", COMMANDS.values(), ids=COMMANDS.keys())
def test_every_command_refuses_a_comment_only_file(argv, tmp_path, capsys):
    path = tmp_path / "comments.rag"
    path.write_text(EMPTY["comments only"], encoding="utf-8")
    assert main([argv[0], str(path), *argv[1:]]) == 2
    assert f"{path}:1:1: error: {MESSAGE}" in capsys.readouterr().err


def test_run_refuses_a_start_that_never_reaches_end(tmp_path, capsys):
    path = tmp_path / "stuck.rag"
    path.write_text('input question\ngenerate a -> answer: "{question}"\n'
                    "flow:\n    a -> end\n", encoding="utf-8")
    assert main(["run", str(path), "-q", "x", "--engine", "sim"]) == 2
    err = capsys.readouterr().err
    assert "stuck.rag:3:1: error: START has no unconditional next edge" in err


def test_verify_refuses_a_graph_with_no_way_from_start_to_end():
    graph = RAGraph("stuck")
    graph.add_input("question")
    graph.add_generation("a", "{question}", "answer")
    graph.add_edge(START, "a")
    graph.add_edge("a", "a", max_iters=2)
    with pytest.raises(WorkflowError, match="'a' has no unconditional next edge"):
        graph.verify()
    graph.add_edge("a", END)
    graph.verify()  # the same graph with its way out is a workflow
