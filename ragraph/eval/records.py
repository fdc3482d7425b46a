"""Reading JSON data files record by record, keeping each record's line for error messages.

JSONL (optionally gzipped), a JSON array of records and a JSON object of entries are all read as a
stream of `Record`s. For the two JSON layouts the file is decoded one element at a time with
`raw_decode`, so a bad element is reported at its own line and `limit` stops early.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ragraph.errors import RagraphError


class DatasetError(RagraphError):
    """A data file that cannot be read: names the file, the line and the field."""

    def __init__(self, where: str, message: str) -> None:
        self.where = where
        self.message = message
        super().__init__(f"{where}: error: {message}")


@dataclass(frozen=True)
class Record:
    """One decoded record and where it came from; typed getters raise `DatasetError` naming the field."""

    path: str
    line: int
    value: object
    key: str | None = None  # the entry's key when the file is a JSON object

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    def error(self, message: str) -> DatasetError:
        return DatasetError(self.where, message)

    def fields(self) -> dict:
        if not isinstance(self.value, dict):
            raise self.error(f"expected a JSON object, got {_type(self.value)}")
        return self.value

    def get(self, name: str, kind: type | tuple[type, ...], default: object = ...) -> object:
        data = self.fields()
        if name not in data:
            if default is not ...:
                return default
            raise self.error(f"missing field '{name}'")
        value = data[name]
        if isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
            raise self.error(f"field '{name}': expected {_kind(kind)}, got {_type(value)}")
        return value

    def text(self, name: str, default: object = ...) -> str:
        return self.get(name, str, default)  # type: ignore[return-value]

    def strings(self, name: str, default: object = ...) -> tuple[str, ...]:
        values = self.get(name, list, default)
        if not all(isinstance(v, str) for v in values):  # type: ignore[union-attr]
            raise self.error(f"field '{name}': expected a list of strings")
        return tuple(values)  # type: ignore[arg-type]


_KIND_NAMES = {
    dict: "an object",
    list: "a list",
    str: "a string",
    bool: "a boolean",
    int: "a number",
}


def _type(value: object) -> str:
    if value is None:
        return "null"
    return _KIND_NAMES.get(type(value), "a number")


def _kind(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(_KIND_NAMES.get(k, "null" if k is type(None) else k.__name__) for k in kinds)


def read_text(path: Path) -> str:
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rt", encoding="utf-8") as fh:
                return fh.read()
        return path.read_text(encoding="utf-8")
    except FileNotFoundError as err:
        raise DatasetError(str(path), "no such file") from err
    except (OSError, UnicodeDecodeError, EOFError) as err:
        raise DatasetError(str(path), f"cannot read: {err}") from err


def iter_records(path: Path) -> Iterator[Record]:
    """Records of a JSONL file, a JSON array or a JSON object of entries, whichever the file holds.

    `.jsonl` files are read line by line and `.json` files as one document; any other name is a
    document when it starts with "[" or when its first line is not a whole JSON value.
    """
    text = read_text(path)
    start = _skip_ws(text, 0)
    if _is_document(path, text, start):
        yield from _iter_container(str(path), text, start)
    else:
        yield from _iter_lines(str(path), text)


def _is_document(path: Path, text: str, start: int) -> bool:
    name = path.name.removesuffix(".gz")
    if name.endswith(".jsonl") or start >= len(text):
        return False
    if name.endswith(".json") or text[start] == "[":
        return True
    try:
        json.loads(text[start:].split("\n", 1)[0])
    except json.JSONDecodeError:
        return True
    return False


def _iter_lines(path: str, text: str) -> Iterator[Record]:
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as err:
            raise DatasetError(
                f"{path}:{number}", f"invalid JSON: {err.msg} (column {err.colno})"
            ) from err
        yield Record(path, number, value)


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def _iter_container(path: str, text: str, pos: int) -> Iterator[Record]:
    decoder = json.JSONDecoder()
    is_object, close = text[pos] == "{", "}" if text[pos] == "{" else "]"
    pos = _skip_ws(text, pos + 1)
    tracker = _LineTracker(text)
    while pos < len(text) and text[pos] != close:
        key = None
        if is_object:
            key, pos = _decode(decoder, text, pos, path)
            pos = _expect(text, _skip_ws(text, pos), ":", path, tracker)
        line = tracker.line(pos)
        value, pos = _decode(decoder, text, pos, path)
        yield Record(path, line, value, key if isinstance(key, str) else None)
        pos = _skip_ws(text, pos)
        if pos < len(text) and text[pos] == ",":
            pos = _skip_ws(text, pos + 1)
        elif pos < len(text) and text[pos] != close:
            raise DatasetError(f"{path}:{tracker.line(pos)}", f"expected ',' or '{close}'")
    if pos >= len(text):
        raise DatasetError(
            f"{path}:{tracker.line(pos)}", f"unexpected end of file, expected '{close}'"
        )


def _decode(decoder: json.JSONDecoder, text: str, pos: int, path: str) -> tuple[object, int]:
    # raw_decode reports lineno over the whole text, so its position is the file's.
    try:
        return decoder.raw_decode(text, pos)
    except json.JSONDecodeError as err:
        raise DatasetError(
            f"{path}:{err.lineno}", f"invalid JSON: {err.msg} (column {err.colno})"
        ) from err


def _expect(text: str, pos: int, char: str, path: str, tracker: _LineTracker) -> int:
    if pos >= len(text) or text[pos] != char:
        raise DatasetError(f"{path}:{tracker.line(pos)}", f"expected '{char}'")
    return _skip_ws(text, pos + 1)


class _LineTracker:
    """Line numbers for increasing offsets, counting newlines only once over the whole file."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._pos = 0
        self._line = 1

    def line(self, pos: int) -> int:
        self._line += self._text.count("\n", self._pos, pos)
        self._pos = pos
        return self._line
