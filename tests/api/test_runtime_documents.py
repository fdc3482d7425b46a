"""`rt.index`: documents in through the API, answered from with their origin (slow: the
passages are embedded with the real MiniLM)."""

from __future__ import annotations

from pathlib import Path

import pytest

import ragraph
from ragraph.errors import ConfigError

pytestmark = pytest.mark.slow  # the real MiniLM embedder
WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"


def test_index_documents_then_answer_from_them(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "tower.md").write_text("# Eiffel Tower\n\nThe Eiffel Tower in Paris was designed by "
                                   "the company of Gustave Eiffel.\n", encoding="utf-8")
    (docs / "violin.txt").write_text("The violin is a wooden string instrument played with a "
                                     "bow.\n", encoding="utf-8")
    rt = ragraph.Runtime(engine="sim")
    with pytest.raises(ConfigError, match="^out:"):
        rt.index([docs])  # the embedded default index is never changed in place
    report = rt.index([docs], out=tmp_path / "index")
    assert report.documents == 2
    wf = ragraph.load(WORKFLOWS / "oneshot.rag")
    with ragraph.Runtime(engine="sim", index=tmp_path / "index", nprobe=4) as mine:
        answer = mine.run(wf, "What is played with a bow?")
    top = answer.passages[0]
    assert top.origin is not None and top.origin.source.endswith("violin.txt")
