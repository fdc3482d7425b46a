"""The `--output` of `ragraph run --input`: a journal while the run goes, the input's order at
the end, and what `--resume` keeps of an earlier run.

While the run goes the output file is an append-only journal: each finished request's line is
written, flushed and fsync'd as it finishes, so a kill loses at most the requests in flight.
When the run ends the file is rewritten in input order (a temporary file renamed over it, so a
kill during the rewrite leaves the journal whole). `--resume` keeps the lines that have an answer
and runs every other request again: a failure may be transient (an engine down, a timeout), and
a bad input line costs nothing to report again.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from ragraph.errors import ConfigError
from ragraph.runtime.durable import fsync_path

Row = dict[str, Any]


def encode(row: Row) -> bytes:
    """One JSONL line. Text UTF-8 cannot hold (a lone surrogate from `"\\ud800"` in the input)
    is written as JSON escapes on that line alone, which read back to the same string."""
    try:
        return (json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(row, ensure_ascii=True) + "\n").encode("ascii")


class Journal:
    """The output file while a run goes: one line per finished request, appended."""

    def __init__(self, path: Path, kept: Iterable[Row]) -> None:
        # The kept lines are written anew first: a resumed journal may end in a line the kill
        # tore, and appending after it would glue the next line onto it.
        replace_with(path, kept)
        self.path = path
        self._out: IO[bytes] | None = path.open("ab")

    def append(self, row: Row) -> None:
        if self._out is None:
            raise ValueError(f"the journal {self.path} is closed")
        self._out.write(encode(row))
        self._out.flush()
        os.fsync(self._out.fileno())

    def close(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None


def replace_with(path: Path, rows: Iterable[Row]) -> None:
    """Write `rows` to `path` through a temporary file renamed over it: a reader (or a kill)
    sees the old file or the new one, never half of one."""
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as out:
        for row in rows:
            out.write(encode(row))
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
    fsync_path(path.parent)  # the rename itself


def answered(path: Path, questions: Mapping[str, str | None]) -> dict[str, Row]:
    """The lines of an earlier run's output that `--resume` keeps, by id: those with an answer.
    `questions` is this input's question by id (None: a bad line): a line of another input is
    refused, not mixed in."""
    if not path.is_file():
        return {}
    kept: dict[str, Row] = {}
    seen: dict[str, int] = {}
    for number, row in _rows(path):
        rid = str(row.get("id"))
        where = f"--resume: {path}:{number}"
        if rid in seen:
            raise ConfigError(where, f"id {rid!r} is already on line {seen[rid]}")
        seen[rid] = number
        if not _of_this_input(row, rid, questions):
            raise ConfigError(where, f"id {rid!r} with this question is not in the input; is "
                              "this the output of another input file?")
        if "answer" in row and "error" not in row:
            kept[rid] = row
    return kept


def _of_this_input(row: Row, rid: str, questions: Mapping[str, str | None]) -> bool:
    if rid not in questions:
        return False
    asked = questions[rid]
    return asked is None or row.get("question", asked) == asked


def _rows(path: Path) -> Sequence[tuple[int, Row]]:
    """Each line of a journal with its number. A last line without its newline is one a kill
    cut short: it is dropped (its request runs again); any other unreadable line is an error."""
    lines = path.read_bytes().split(b"\n")[:-1]  # what follows the last newline is torn
    out = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ConfigError(f"--resume: {path}:{number}", f"not a line ragraph wrote: {err}") \
                from err
        if not isinstance(row, dict):
            raise ConfigError(f"--resume: {path}:{number}", "not a line ragraph wrote")
        out.append((number, row))
    return out
