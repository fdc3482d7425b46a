"""lark's syntax errors turned into located WorkflowErrors that say what was expected, in words."""

from __future__ import annotations

import re

from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from ragraph.errors import Span, WorkflowError

# Named terminals of ragraph.lark in words; keywords and punctuation are shown quoted.
_FRIENDLY = {
    "NAME": "a name",
    "INT": "a whole number",
    "NUMBER": "a number",
    "STRING": 'a "string"',
    "BLOCK": 'a """prompt"""',
    "BOOL": "true or false",
    "CONDITION": "a condition",
    "_NL": "end of line",
    "$END": "end of file",
}
_MAX_SHOWN = 30
_FIRST_WORD = re.compile(r'"(?:[^"\\\n]|\\.)*"|\w+|\S')


def syntax_error(err: UnexpectedInput, text: str, file: str | None,
                 literals: dict[str, str]) -> WorkflowError:
    """`literals` maps terminal names of keywords/punctuation to their text (from the parser)."""
    if isinstance(err, UnexpectedCharacters):
        return _bad_character(err, text, file, literals)
    if isinstance(err, UnexpectedToken):
        if str(err.token.value).startswith("'"):
            line, col = _position(err, text)
            return WorkflowError("strings are written in double quotes",
                                 span=Span(line, col, file=file))
        expected = _expected(err.accepts or err.expected, literals)
        found = _describe(err.token.type, str(err.token.value))
        line, col = _position(err, text)
        return WorkflowError(f"unexpected {found}, expected {expected}", span=Span(line, col, file=file))
    if isinstance(err, UnexpectedEOF):
        line, col = _end_of(text)
        return WorkflowError(f"unexpected end of file, expected {_expected(err.expected, literals)}",
                             span=Span(line, col, file=file))
    line, col = _position(err, text)
    return WorkflowError("syntax error", span=Span(line, col, file=file))


def _bad_character(err: UnexpectedCharacters, text: str, file: str | None,
                   literals: dict[str, str]) -> WorkflowError:
    pos, line, col = err.pos_in_stream, err.line, err.column
    char = text[pos] if 0 <= pos < len(text) else ""
    if char == '"' and pos >= 2 and text[pos - 2 : pos + 1] == '"""':
        return WorkflowError('unterminated """ string', span=Span(line, max(col - 2, 1), file=file),
                             hint='close it with """ on a line of its own')
    if char == '"':
        return WorkflowError("unterminated string", span=Span(line, col, file=file),
                             hint='a "string" ends on the line it starts; use """ for several lines')
    if char == "'":
        return WorkflowError("strings are written in double quotes", span=Span(line, col, file=file))
    allowed = _expected(err.allowed or (), literals) if err.allowed else None
    message = f"unexpected character {char!r}" + (f", expected {allowed}" if allowed else "")
    return WorkflowError(message, span=Span(line, col, file=file))


def _describe(kind: str, value: str) -> str:
    if kind in ("$END", "_NL"):  # an _NL token may start with a trailing comment: still a line end
        return _FRIENDLY[kind]
    # When no terminal of the parser's state matches, lark re-lexes with every terminal, and the
    # catch-all CONDITION may swallow the rest of the line: show only its first word or symbol.
    first = _FIRST_WORD.match(value)
    shown = first.group() if first else value
    if len(shown) > _MAX_SHOWN:
        shown = shown[:_MAX_SHOWN] + "..."
    return repr(shown)


def _expected(names: object, literals: dict[str, str]) -> str:
    words = sorted({_FRIENDLY.get(n) or _literal(n, literals) for n in names})  # type: ignore[attr-defined]
    if not words:
        return "nothing more"
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def _literal(name: str, literals: dict[str, str]) -> str:
    return repr(literals[name]) if name in literals else name.lower()


def _position(err: UnexpectedInput, text: str) -> tuple[int, int]:
    line, col = getattr(err, "line", -1), getattr(err, "column", -1)
    if not isinstance(line, int) or line < 1 or not isinstance(col, int) or col < 1:
        return _end_of(text)
    return line, col


def _end_of(text: str) -> tuple[int, int]:
    lines = text.rstrip("\n").split("\n")
    return len(lines), len(lines[-1]) + 1
