"""docs/guides/documents.md's workflow for your own documents passes `ragraph check` as shown."""

from __future__ import annotations

from pathlib import Path

from ragraph.cli.main import main
from tests.docs.pages import DOCS, FENCE, TITLE


def test_the_documents_workflow_checks(tmp_path: Path, monkeypatch, capsys) -> None:
    text = (DOCS / "guides" / "documents.md").read_text(encoding="utf-8")
    titled = [(TITLE.search(b["info"]), b["body"]) for b in FENCE.finditer(text)
              if b["info"].startswith("rag") and TITLE.search(b["info"])]
    assert [t["name"] for t, _ in titled] == ["notes.rag"]
    monkeypatch.chdir(tmp_path)
    Path("notes.rag").write_text(titled[0][1], encoding="utf-8")
    assert main(["check", "notes.rag"]) == 0
    assert capsys.readouterr().out.startswith("ok notes.rag ")
