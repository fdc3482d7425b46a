"""The passage store: SQLite (standard library), id -> title, text, origin.

Ids are the faiss ids (0..n-1 in build order, then counting on as documents are added; a deleted
id is never reused), so a search result maps to a row without a join. `synthetic` marks padding
passages (vectors added to reach a target index size in load tests) so they are never shown as
evidence. `source`, `start`, `end` say which document a passage was cut from and where (NULL for
a JSONL corpus's passages), and `headings` a Markdown passage's heading path (a JSON array of
strings, NULL when none); a store written before they existed has no such columns and reads as
all NULL. Reads go through one connection guarded by a lock: SQLite connections are not safe to
share across threads without one, and lookups are short.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ragraph.errors import SearchIndexError
from ragraph.ir.values import Origin, Passage, Passages
from ragraph.runtime.retrieval.keywords import (
    allowed_ids,
    create_keyword_index,
    has_keyword_index,
    keyword_ids,
    missing_keyword_index,
)
from ragraph.runtime.retrieval.options import Where

_SCHEMA = """
CREATE TABLE passages (
    id INTEGER PRIMARY KEY,
    doc_id TEXT,
    title TEXT NOT NULL,
    text TEXT NOT NULL,
    synthetic INTEGER NOT NULL DEFAULT 0,
    source TEXT,
    start INTEGER,
    "end" INTEGER,
    headings TEXT
)
"""
_ORIGIN_COLUMNS = ("source", "start", '"end"', "headings")
# SQLite's default limit on bound parameters is 999 in old builds; stay under it per query.
_CHUNK = 900
# Filters a store remembers the allowed ids of (a store is never changed while open).
_WHERE_CACHE = 32


@dataclass(frozen=True)
class StoredPassage:
    """One row to write: the faiss id, the corpus's own id (if any), title, text, origin."""

    id: int
    doc_id: str | None
    title: str
    text: str
    synthetic: bool = False
    origin: Origin | None = None


def write_store(path: Path, rows: Iterable[StoredPassage]) -> int:
    """Create a new store at `path` (replacing none: the file must not exist); returns the count."""
    if path.exists():
        raise SearchIndexError(f"{path}: passage store already exists")
    conn = sqlite3.connect(path)
    try:
        conn.execute(_SCHEMA)
        create_keyword_index(conn)
        count = insert_rows(conn, rows)
        conn.commit()
        return count
    finally:
        conn.close()


def insert_rows(conn: sqlite3.Connection, rows: Iterable[StoredPassage]) -> int:
    """Insert `rows` into an open store (the caller commits)."""
    cur = conn.executemany(
        'INSERT INTO passages (id, doc_id, title, text, synthetic, source, start, "end", '
        "headings) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        ((r.id, r.doc_id, r.title, r.text, int(r.synthetic), *_origin_row(r.origin))
         for r in rows),
    )
    return cur.rowcount


def _origin_row(origin: Origin | None) -> tuple:
    if origin is None:
        return (None,) * 4
    headings = json.dumps(list(origin.headings), ensure_ascii=False) if origin.headings else None
    return origin.source, origin.start, origin.end, headings


def add_origin_columns(conn: sqlite3.Connection) -> None:
    """Give a store written before passages had origins (or heading paths) their columns (NULL
    for old rows)."""
    have = {row[1] for row in conn.execute("PRAGMA table_info(passages)")}
    for column, kind in (("source", "TEXT"), ("start", "INTEGER"), ("end", "INTEGER"),
                         ("headings", "TEXT")):
        if column not in have:
            conn.execute(f'ALTER TABLE passages ADD COLUMN "{column}" {kind}')


class PassageStore:
    """Read-only, thread-safe batch lookup of passages by id."""

    def __init__(self, path: Path) -> None:
        if not path.is_file():
            raise SearchIndexError(f"{path}: passage store is missing")
        try:
            self._conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
            (self._count,) = self._conn.execute("SELECT COUNT(*) FROM passages").fetchone()
        except sqlite3.DatabaseError as err:
            raise SearchIndexError(f"{path}: not a ragraph passage store ({err})") from err
        self._path = path
        self._lock = threading.Lock()
        columns = {row[1] for row in self._conn.execute("PRAGMA table_info(passages)")}
        origin = ", ".join(c if c.strip('"') in columns else "NULL" for c in _ORIGIN_COLUMNS)
        self._select = f"SELECT id, title, text, synthetic, {origin} FROM passages WHERE id IN "
        self._columns = frozenset(columns)
        self._keywords = has_keyword_index(self._conn)
        self._allowed: dict[Where, np.ndarray] = {}

    def __len__(self) -> int:
        return int(self._count)

    def lookup(
        self, ids: Sequence[int] | np.ndarray, scores: Sequence[float] | np.ndarray | None = None
    ) -> Passages:
        """The passages of `ids` in the given order (ids < 0, faiss's padding, are skipped)."""
        ids_list = [int(i) for i in np.asarray(ids).reshape(-1)]
        score_list = [0.0] * len(ids_list) if scores is None else [float(s) for s in scores]
        rows = self._fetch(sorted({i for i in ids_list if i >= 0}))
        out = []
        for i, s in zip(ids_list, score_list, strict=True):
            if i < 0:
                continue
            if i not in rows:
                raise SearchIndexError(f"{self._path}: no passage with id {i}")
            title, text, synthetic, source, start, end, headings = rows[i]
            origin = None if source is None else Origin(
                source, start, end, tuple(json.loads(headings)) if headings else ())
            out.append(Passage(i, title, text, score=s, synthetic=bool(synthetic), origin=origin))
        return Passages(tuple(out))

    def keyword_ids(self, text: str, k: int, where: Where | None = None) -> list[int]:
        """The `k` passages best for `text` by BM25 (keywords.py), best first."""
        if not self._keywords:
            raise missing_keyword_index(self._path)
        with self._lock:
            return keyword_ids(self._conn, text, k, where, self._columns)

    def allowed_ids(self, where: Where) -> np.ndarray:
        """The ids of the passages `where` allows, ascending (int64)."""
        with self._lock:
            ids = self._allowed.get(where)
            if ids is None:
                ids = np.asarray(allowed_ids(self._conn, where, self._columns), dtype=np.int64)
                if len(self._allowed) >= _WHERE_CACHE:
                    self._allowed.pop(next(iter(self._allowed)))
                self._allowed[where] = ids
            return ids

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def _fetch(self, ids: list[int]) -> dict[int, tuple]:
        found: dict[int, tuple] = {}
        with self._lock:
            for start in range(0, len(ids), _CHUNK):
                chunk = ids[start : start + _CHUNK]
                marks = ",".join("?" * len(chunk))
                for row in self._conn.execute(f"{self._select}({marks})", chunk):
                    found[row[0]] = row[1:]
        return found


def ids_of_sources(conn: sqlite3.Connection, sources: Sequence[str]) -> dict[str, list[int]]:
    """The ids of each source's passages: the document at that path, or every document under it
    when it is a folder."""
    have = {row[1] for row in conn.execute("PRAGMA table_info(passages)")}
    if "source" not in have:
        return {s: [] for s in sources}
    out: dict[str, list[int]] = {}
    for source in sources:
        folder = source.rstrip("/") + "/"
        rows = conn.execute(
            "SELECT id FROM passages WHERE source = ? OR substr(source, 1, ?) = ? ORDER BY id",
            (source, len(folder), folder))
        out[source] = [row[0] for row in rows]
    return out


def existing_ids(conn: sqlite3.Connection, ids: Sequence[int]) -> set[int]:
    found: set[int] = set()
    for start in range(0, len(ids), _CHUNK):
        chunk = list(ids[start : start + _CHUNK])
        marks = ",".join("?" * len(chunk))
        found.update(r[0] for r in conn.execute(
            f"SELECT id FROM passages WHERE id IN ({marks})", chunk))
    return found


def delete_rows(conn: sqlite3.Connection, ids: Sequence[int]) -> None:
    conn.executemany("DELETE FROM passages WHERE id = ?", ((int(i),) for i in ids))
