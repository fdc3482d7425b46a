"""Reading the documentation pages' examples: the `.rag` blocks of a page and what it shows
`ragraph check` printing for them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"
# A fenced block: its info string (language and attributes) and its body.
FENCE = re.compile(r'^```(?P<info>[^\n]*)\n(?P<body>.*?)^```$', re.MULTILINE | re.DOTALL)
TITLE = re.compile(r'title="(?P<name>[^"]+)"')
CHECK = re.compile(r"\$ ragraph check (?P<name>\S+)\n")


@dataclass(frozen=True)
class Example:
    """A `.rag` block; `error` is the `ragraph check` output shown right under it, None when the
    page presents it as a valid workflow."""

    name: str
    source: str
    error: str | None
    line: int  # where the block starts on the page, for failure messages


def rag_examples(page: str) -> list[Example]:
    text = (DOCS / page).read_text(encoding="utf-8")
    blocks = list(FENCE.finditer(text))
    examples = []
    for i, block in enumerate(blocks):
        info = block["info"].strip()
        if info.split(" ", 1)[0] != "rag":
            continue
        title = TITLE.search(info)
        if title is None:
            raise ValueError(f"{page}: the rag block on line {_line(text, block)} has no title")
        after = blocks[i + 1] if i + 1 < len(blocks) else None
        error = None
        if after is not None and after["info"].strip() == "console":
            shown = CHECK.match(after["body"])
            if shown is None or shown["name"] != title["name"]:
                raise ValueError(f"{page}: the console block on line {_line(text, after)} is not "
                                 f"`$ ragraph check {title['name']}`")
            error = after["body"][shown.end():]
        examples.append(Example(title["name"], block["body"], error, _line(text, block)))
    return examples


def _line(text: str, match: re.Match[str]) -> int:
    return text.count("\n", 0, match.start()) + 1
