"""Requests for `ragraph run --input`: FlashRAG JSONL line by line (a bad line becomes that line's
error and the rest go on), or any dataset format `ragraph.eval` knows (NQ, HotpotQA, MuSiQue).

Every line's id is unique: answers are matched to questions by id (in the output, and by
`--resume`), so a repeated id would give one question another's answer. A line without an id is
named `line-N` after its line number, which is stable when the file moves (a resume finds it)."""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

from ragraph.errors import ConfigError, RagraphError
from ragraph.ir.filters import parse_filter
from ragraph.runtime.request import Request
from ragraph.runtime.retrieval.options import MODES, NO_OPTIONS, SearchOptions


@dataclass(frozen=True)
class BadLine:
    """An input line that is not a valid request: reported in the output, never run."""

    id: str
    error: str
    question: str | None = None  # as the line asked it, when it asked one

    def to_json(self) -> dict[str, str]:
        # A bad line is the input's fault: the same kind a server gives a client's mistake.
        asked = {} if self.question is None else {"question": self.question}
        return {"id": self.id, **asked, "error": self.error, "error_kind": "input"}


@dataclass(frozen=True)
class IdUse:
    """Where a line's id came from: `written` is the id as the line spells it (JSON), None when
    the line had none and is named after its number."""

    id: str
    line: int
    written: str | None

    def describe(self) -> str:
        if self.written is None:
            return f"line {self.line} (no id, so named {self.id})"
        if self.written != json.dumps(self.id):
            return f"line {self.line} (as {self.written})"
        return f"line {self.line}"


def add_search_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--k", type=int, help="passages each retrieval returns (over the workflow's "
                   "topk)")
    p.add_argument("--mode", choices=MODES, help="dense: the vector index alone; hybrid: fused "
                   "with the keyword index (BM25) by reciprocal rank fusion")
    p.add_argument("--filter", action="append", metavar="FIELD=VALUE",
                   help="only passages whose FIELD equals VALUE; source=GLOB matches the "
                   "document's path (`*` crosses folders: source='guides/*', source='*.md'); "
                   "repeat for several")


def search_options(args: argparse.Namespace) -> SearchOptions:
    """`ragraph run --k N --mode hybrid --filter source=guides/*.md --filter title=X`."""
    try:
        where = dict(parse_filter(args.filter or ()))
    except ValueError as err:
        raise ConfigError("--filter", str(err)) from err
    return SearchOptions.of(args.k, args.mode, where or None)


def read_requests(path: Path, limit: int | None = None,
                  search: SearchOptions = NO_OPTIONS) -> list[Request | BadLine]:
    if not path.is_file():
        raise ConfigError("--input", f"{path}: no such file")
    if path.suffix == ".jsonl" and not path.name.endswith(".gz"):
        items = _jsonl(path, limit)
    else:
        from ragraph.eval.datasets import load_dataset  # refuses duplicate ids itself

        items = [Request(id=ex.id, question=ex.question, golden_answers=tuple(ex.golden_answers))
                 for ex in load_dataset(path, limit=limit)]
    if search.empty:
        return items
    return [replace(r, search=search.over(r.search)) if isinstance(r, Request) else r
            for r in items]


def _jsonl(path: Path, limit: int | None) -> list[Request | BadLine]:
    out: list[Request | BadLine] = []
    uses: list[IdUse] = []
    with path.open("rb") as lines:
        for number, data in enumerate(lines, start=1):
            if limit is not None and len(out) >= limit:
                break
            if not data.strip():
                continue
            item, written = _line(data, f"{path}:{number}", number)
            out.append(item)
            uses.append(IdUse(item.id, number, written))
    check_unique(path, uses)
    return out


def _line(data: bytes, where: str, number: int) -> tuple[Request | BadLine, str | None]:
    """One line's request (or why it is not one) and its id as written."""
    try:
        # Bytes, not text, so that one line's bad UTF-8 is that line's error, not the run's.
        raw = json.loads(data.decode("utf-8-sig" if number == 1 else "utf-8"))
    except UnicodeDecodeError as err:
        return BadLine(f"line-{number}", f"{where}: not UTF-8 text ({err.reason} at byte "
                       f"{err.start})"), None
    except json.JSONDecodeError as err:
        return BadLine(f"line-{number}", f"{where}: not JSON: {err.msg}"), None
    if not isinstance(raw, dict):
        return BadLine(f"line-{number}", f"{where}: expected a JSON object"), None
    given = raw.get("id")
    rid = f"line-{number}" if given is None else str(given)
    written = None if given is None else json.dumps(given)
    try:
        return Request.from_json({**raw, "id": rid}, where), written
    except RagraphError as err:
        question = raw.get("question")
        return BadLine(rid, str(err), question if isinstance(question, str) else None), written


def check_unique(path: Path, uses: list[IdUse]) -> None:
    """Refuse the file, before any model loads, when two lines share an id; the error lists
    every shared id with its lines."""
    by_id: dict[str, list[IdUse]] = defaultdict(list)
    for use in uses:
        by_id[use.id].append(use)
    shared = [group for group in by_id.values() if len(group) > 1]
    if not shared:
        return
    rows = "\n".join(f"  id {group[0].id!r}: " + ", ".join(u.describe() for u in group)
                     + _same_text_note(group) for group in shared)
    raise ConfigError("--input", f"{path}: {len(shared)} id(s) used by more than one line "
                      f"(each answer is matched to its question by id):\n{rows}")


def _same_text_note(group: list[IdUse]) -> str:
    spellings = list(dict.fromkeys(u.written for u in group if u.written is not None))
    if len(spellings) < 2:
        return ""
    return f"; {' and '.join(spellings)} are the same id (ids are compared as text)"
