"""String literals of `.rag`: decoding with a position for every character, and encoding back.

The decoding rules are stated in ragraph.lark; the printer uses `encode_block` only when decoding
gives the text back exactly, so printing never changes a prompt.
"""

from __future__ import annotations

import os
import re

from ragraph.dsl.ast import Text
from ragraph.errors import Span

_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"'}
_BLANK = re.compile(r"[ \t]*\Z")
_INDENT = re.compile(r"[ \t]*")


def decode_string(raw: str, line: int, col: int, file: str | None) -> Text:
    """A one-line `"..."` literal starting at (line, col)."""
    chars: list[str] = []
    positions: list[tuple[int, int]] = []
    i = 1
    while i < len(raw) - 1:
        positions.append((line, col + i))
        if raw[i] == "\\" and i + 1 < len(raw) - 1 and raw[i + 1] in _ESCAPES:
            chars.append(_ESCAPES[raw[i + 1]])
            i += 2
        else:  # any other backslash is kept as written (Python-like): "\s" in a regex stays
            chars.append(raw[i])
            i += 1
    positions.append((line, col + len(raw) - 1))
    span = Span(line, col, line, col + len(raw), file=file)
    return Text("".join(chars), span, tuple(positions))


def decode_block(raw: str, line: int, col: int, file: str | None) -> Text:
    """A `\"\"\"...\"\"\"` literal starting at (line, col): literal, trimmed, dedented."""
    body = raw[3:-3]
    starts = [(line, col + 3)] + [(line + i, 1) for i in range(1, body.count("\n") + 1)]
    lines = list(zip(body.split("\n"), starts, strict=True))
    if lines and _BLANK.match(lines[0][0]):
        lines = lines[1:]
    if lines and _BLANK.match(lines[-1][0]):
        lines = lines[:-1]
    kept = [text for text, _ in lines if not _BLANK.match(text)]
    margin = len(os.path.commonprefix([_INDENT.match(t).group() for t in kept])) if kept else 0
    chars: list[str] = []
    positions: list[tuple[int, int]] = []
    for n, (text, (ln, start)) in enumerate(lines):
        if n:  # the line break sits at the end of the previous source line
            prev, (prev_ln, prev_start) = lines[n - 1]
            chars.append("\n")
            positions.append((prev_ln, prev_start + len(prev)))
        piece = "" if _BLANK.match(text) else text[margin:]
        chars.append(piece)
        positions.extend((ln, start + margin + k) for k in range(len(piece)))
    end_line = line + raw.count("\n")
    end_col = len(raw) - raw.rfind("\n") if "\n" in raw else col + len(raw)
    positions.append((end_line, end_col - 3))
    span = Span(line, col, end_line, end_col, file=file)
    return Text("".join(chars), span, tuple(positions))


def encode_string(text: str) -> str:
    """A one-line literal that decodes to `text`."""
    body = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{body}"'


def encode_block(text: str, indent: str) -> str | None:
    """A triple-quoted literal (opening on the current line) that decodes to `text`, or None when
    none does (the text holds `\"\"\"`, or leading whitespace that dedenting would remove)."""
    lines = [indent + line if line else "" for line in text.split("\n")]
    raw = '"""\n' + "\n".join(lines) + "\n" + indent + '"""'
    if decode_block(raw, 1, 1, None).value != text or raw.count('"""') != 2:
        return None
    return raw
