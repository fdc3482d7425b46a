"""The code of docs/guides/langchain.md runs as written: its Runtime on the simulated engine
over the tests' in-memory search, its server the one `ragraph serve` runs, on a loopback port
in place of the page's 8000."""

from __future__ import annotations

import re
import sys
import types
from functools import partial
from pathlib import Path

import pytest

import ragraph
import ragraph.api
from tests.runtime.fakes import random_search
from tests.serve.conftest import SIM, graphs
from tests.serve.servers import serving

pytest.importorskip("langgraph_sdk")
REPO = Path(__file__).resolve().parents[2]
PAGE = "docs/guides/langchain.md"


def blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", (REPO / PAGE).read_text(encoding="utf-8"), re.S)


def run(code: str) -> None:
    # A module of its own: LangGraph reads the TypedDict's hints from its module's globals.
    page = types.ModuleType("langchain_page")
    sys.modules[page.__name__] = page
    try:
        exec(compile(code, PAGE, "exec"), page.__dict__)  # noqa: S102 - the page's code
    finally:
        del sys.modules[page.__name__]


@pytest.fixture(autouse=True)
def one_line_answers(monkeypatch):
    # The page prints answers one a line, and the simulated engine breaks its text into lines
    # when a generation stops only at a blank line (the shipped answers do): read line by line,
    # the printed output would depend on the stand-in text, not on the page's code.
    monkeypatch.setattr("ragraph.runtime.llm.sim.text.LINE_WORDS", 10**6)


@pytest.fixture
def sim(monkeypatch):
    monkeypatch.chdir(REPO)  # the page's paths are the repository's
    monkeypatch.setattr(ragraph, "Runtime", partial(ragraph.api.Runtime, engine="sim",
                                                    search=random_search()))


def test_the_runnable_and_retriever_block(sim, capsys):
    run(blocks()[0])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 5 and lines[1].startswith("[") and lines[3].isupper()
    assert "Title" in lines[4]


def test_the_langgraph_app_block(sim, capsys):
    run(blocks()[1])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all(line.endswith(" 3") for line in lines)


def test_the_langgraph_sdk_block(capsys):
    with serving(graphs(("hyde", "irg")), SIM) as served:
        run(blocks()[2].replace("http://127.0.0.1:8000", served.url))
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "['hyde', 'irg']" and "'END'" in lines[1]
    assert lines[2] == "metadata" and "end" in lines and lines[-1]
