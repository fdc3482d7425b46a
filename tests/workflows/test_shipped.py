"""The shipped workflows are package data: found by name outside the checkout, by
`ragraph.load("hyde")` and `ragraph run hyde`; a file of that name in the working folder wins."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import ragraph
from ragraph import workflows
from ragraph.errors import WorkflowError

ROOT = Path(__file__).resolve().parents[2]


def test_every_shipped_workflow_is_in_the_package_and_the_repository_folder():
    assert workflows.HERE.parent == Path(ragraph.__file__).resolve().parent
    assert "hyde" in workflows.names() and len(workflows.names()) >= 12
    # The checkout's workflows/ is the same folder: one copy of each workflow.
    assert (ROOT / "workflows").resolve() == workflows.HERE
    declared = (ROOT / "pyproject.toml").read_text()
    assert '"workflows/*.rag"' in declared


def test_load_finds_a_shipped_workflow_by_name_from_any_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert ragraph.load("hyde").name == "hyde"
    assert ragraph.load("irg.rag").name == "irg"


def test_a_file_in_the_working_folder_comes_before_the_shipped_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hyde").write_text((workflows.HERE / "oneshot.rag").read_text())
    assert ragraph.load("hyde").name == "oneshot"


@pytest.mark.parametrize("name", ["nosuch", "sub/hyde.rag", "../hyde"])
def test_an_unknown_name_or_a_path_is_an_error_listing_the_shipped_names(name, tmp_path,
                                                                        monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(WorkflowError, match="shipped workflows, by name: .*hyde"):
        ragraph.load(name)


def test_ragraph_run_takes_a_shipped_name(tmp_path, monkeypatch):
    from ragraph.cli.main import main
    from tests.cli.fake_search import use_fake_search

    use_fake_search(monkeypatch)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.jsonl").write_text('{"id": "q0", "question": "Who wrote Middlemarch?"}\n')
    assert main(["run", "oneshot", "--input", "in.jsonl", "--output", "out.jsonl",
                 "--engine", "sim", "--search-threads", "1", "--nprobe", "16"]) == 0
    row = json.loads((tmp_path / "out.jsonl").read_text())
    assert row["workflow"] == "oneshot" and row["answer"]
