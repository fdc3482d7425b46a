"""A Markdown document's structure, for the chunker: where each heading is (markdown-it-py, a
CommonMark parser: a `#` line inside a code block is no heading), the heading path in effect at
any offset, and whether a piece of text is structure alone (headings, code fences, setext rules:
nothing to read, and a poor passage: a 40-character heading ranked first for a question it only
names)."""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from ragraph.runtime.retrieval.build.documents import need

_STRUCTURE_LINE = re.compile(r"[ \t]*(#{1,6}([ \t].*)?|`{3,}.*|~{3,}.*|[=-]{3,}[ \t]*)?")


@dataclass(frozen=True)
class Outline:
    """Each heading's offset in the text, and the heading path (outermost first) from there."""

    starts: tuple[int, ...]
    paths: tuple[tuple[str, ...], ...]

    def path_at(self, offset: int) -> tuple[str, ...]:
        """The headings in effect at `offset`: a heading that starts there is included."""
        at = bisect.bisect_right(self.starts, offset)
        return self.paths[at - 1] if at else ()


def outline(text: str) -> Outline:
    tokens = need("markdown_it").MarkdownIt("commonmark").parse(text)
    line_starts = [0, *(m.end() for m in re.finditer("\n", text))]
    starts: list[int] = []
    paths: list[tuple[str, ...]] = []
    stack: list[tuple[int, str]] = []
    for token, inline in zip(tokens, tokens[1:], strict=False):
        if token.type != "heading_open" or token.map is None:
            continue
        level = int(token.tag[1:])
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, inline.content.strip()))
        starts.append(line_starts[token.map[0]])
        paths.append(tuple(name for _, name in stack))
    return Outline(tuple(starts), tuple(paths))


def structure_only(text: str) -> bool:
    """Whether every line of `text` is a heading, a code fence, a setext rule or blank."""
    return all(_STRUCTURE_LINE.fullmatch(line) for line in text.splitlines())
