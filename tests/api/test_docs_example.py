"""The ten lines of docs/python-api.md run as they are in the page: on the simulated engine over
the tests' in-memory search here, on the embedded model and the default index when slow."""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path

import pytest

import ragraph
import ragraph.api

REPO = Path(__file__).resolve().parents[2]


def example() -> str:
    page = (REPO / "docs" / "python-api.md").read_text(encoding="utf-8")
    return re.search(r"```python\n(.*?)```", page, re.S).group(1)  # type: ignore[union-attr]


def run_example(monkeypatch, capsys) -> str:  # noqa: ANN001 - pytest's fixtures
    monkeypatch.chdir(REPO)  # the page's paths are the repository's
    exec(compile(example(), "docs/python-api.md", "exec"), {})  # noqa: S102 - the page's code
    return capsys.readouterr().out


def test_the_example_runs_as_written(monkeypatch, capsys):
    from tests.runtime.fakes import random_search

    monkeypatch.setattr(ragraph, "Runtime", partial(ragraph.api.Runtime, engine="sim",
                                                    search=random_search()))
    # Answers may span lines (they stop at a blank line), so the output is read in its parts:
    # the run's answer ending with its path, the batch's two answers, then the streamed tokens.
    out = run_example(monkeypatch, capsys)
    single, _, rest = out.partition("'hypo', 'search', 'answer', 'END')\n")
    assert single and rest
    batch = re.findall(r"^req-\S+ ", rest, re.M)
    assert len(batch) == 2
    streamed = rest[rest.rindex(" s\n") + 3:]
    assert streamed
    # The streamed tokens are the answer's alone, not HyDE's hypothetical passage before it.
    with ragraph.Runtime() as rt:
        events = list(rt.stream(ragraph.load("hyde"), "Which river flows through Cairo?"))
    assert streamed.strip() == events[-1].answer.answer.strip()
    assert any(isinstance(e, ragraph.Token) and e.output == "passage" for e in events)


@pytest.mark.slow  # the embedded Gemma model and the default Wikipedia index
def test_the_example_runs_on_the_embedded_model(monkeypatch, capsys):
    out = run_example(monkeypatch, capsys)
    assert "Eiffel" in out and "END" in out
