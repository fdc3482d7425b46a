"""docs/builder.md's Python blocks run, in order, in one namespace, as a reader would paste
them; and the message the page shows for a mistake is the one printed."""

from __future__ import annotations

import contextlib
import io

from tests.docs.pages import DOCS, FENCE


def test_every_python_block_runs() -> None:
    text = (DOCS / "builder.md").read_text(encoding="utf-8")
    blocks = [m["body"] for m in FENCE.finditer(text) if m["info"].strip() == "python"]
    assert len(blocks) >= 5
    namespace: dict[str, object] = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for block in blocks:
            exec(compile(block, "docs/builder.md", "exec"), namespace)  # noqa: S102
    shown = "error: generation 'answer': max_tokens must be an integer in 1..32768, got 0"
    assert shown in text and shown in out.getvalue().splitlines()
