"""docs/language.md cannot go stale: every workflow it shows passes `ragraph check`, and every
misuse it shows fails with exactly the message printed under it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragraph.cli.main import main
from tests.docs.pages import rag_examples

EXAMPLES = rag_examples("language.md")


def test_the_page_shows_valid_workflows_and_misuses() -> None:
    assert sum(e.error is None for e in EXAMPLES) >= 10
    assert sum(e.error is not None for e in EXAMPLES) >= 30


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: f"line{e.line}-{e.name}")
def test_example_checks_as_the_page_says(example, tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    Path(example.name).write_text(example.source, encoding="utf-8")
    status = main(["check", example.name])
    out, err = capsys.readouterr()
    if example.error is None:
        assert (status, err) == (0, ""), f"docs/language.md:{example.line} should check:\n{err}"
        assert out.startswith(f"ok {example.name} ")
    else:
        assert status == 2
        assert err == example.error, f"docs/language.md:{example.line} shows another message"
