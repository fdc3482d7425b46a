"""`ragraph run` drives the scheduler itself, on the CLI's own event loop: no server hub and no
Python API `Runtime` in between, each request under its own id (the line's), and one line's bad
inputs are that line's error, not the run's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragraph.cli import run_single
from ragraph.cli.main import main
from ragraph.runtime import app as runtime_app
from ragraph.runtime.hub import Hub
from tests.cli.fake_search import _fake_open_run, use_fake_search

ONESHOT = str(Path(__file__).resolve().parents[2] / "workflows" / "oneshot.rag")


def lines(*rows: object) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


@pytest.fixture
def no_hub(monkeypatch) -> list[str]:  # noqa: ANN001 - pytest's MonkeyPatch
    """The hub refuses to start; yields the ids of the requests the executor takes."""
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("ragraph run went through the server's hub")

    monkeypatch.setattr(Hub, "__init__", refuse)
    seen: list[str] = []
    real = runtime_app.make_executor

    def make(config, services, client=None):  # noqa: ANN001, ANN202 - make_executor's
        executor = real(config, services, client)
        run = executor.run

        async def watched(catalog, arrivals, on_done):  # noqa: ANN001, ANN202
            async def each():  # noqa: ANN202
                async for request in arrivals:
                    seen.append(request.id)
                    yield request
            return await run(catalog, each(), on_done)
        executor.run = watched
        return executor

    monkeypatch.setattr(runtime_app, "make_executor", make)
    return seen


def test_run_input_takes_each_line_under_its_own_id_without_the_hub(tmp_path, monkeypatch,
                                                                     no_hub, capsys):
    use_fake_search(monkeypatch)
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text(lines({"id": "a", "question": "q1"}, {"id": 2, "question": "q2"},
                         {"question": "q3"}), encoding="utf-8")
    assert main(["run", ONESHOT, "-i", str(src), "-o", str(out), "--engine", "sim"]) == 0
    assert sorted(no_hub) == ["2", "a", "line-3"]
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in rows] == ["a", "2", "line-3"]
    assert all(r["answer"] for r in rows)
    assert "clusters searched" in capsys.readouterr().out


def test_run_question_without_the_hub(monkeypatch, no_hub, capsys):
    monkeypatch.setattr(run_single, "open_run", _fake_open_run)
    assert main(["run", ONESHOT, "-q", "Who wrote Hamlet?", "--engine", "sim", "-v"]) == 0
    assert no_hub == ["q1"]
    out = capsys.readouterr().out
    assert "path" in out and "speculation:" in out


def test_a_lines_unknown_input_is_that_lines_error(tmp_path, monkeypatch, capsys):
    use_fake_search(monkeypatch)
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text(lines({"id": "a", "question": "q1"},
                         {"id": "b", "question": "q2", "inputs": {"nope": "x"}}),
                   encoding="utf-8")
    assert main(["run", ONESHOT, "-i", str(src), "-o", str(out), "--engine", "sim"]) == 0
    rows = {r["id"]: r for r in map(json.loads, out.read_text(encoding="utf-8").splitlines())}
    assert rows["a"]["answer"]
    assert rows["b"]["error_kind"] == "input"
    assert "inputs.nope" in rows["b"]["error"] and "has no such input" in rows["b"]["error"]
