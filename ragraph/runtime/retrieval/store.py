"""The passage store: SQLite (standard library), id -> title, text.

Ids are the faiss ids (0..n-1 in build order), so a search result maps to a row without a join.
`synthetic` marks padding passages (vectors added to reach a target index size in load tests) so
they are never shown as evidence. Reads go through one connection guarded by a lock: SQLite
connections are not safe to share across threads without one, and lookups are short.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ragraph.errors import SearchIndexError
from ragraph.ir.values import Passage, Passages

_SCHEMA = """
CREATE TABLE passages (
    id INTEGER PRIMARY KEY,
    doc_id TEXT,
    title TEXT NOT NULL,
    text TEXT NOT NULL,
    synthetic INTEGER NOT NULL DEFAULT 0
)
"""
# SQLite's default limit on bound parameters is 999 in old builds; stay under it per query.
_CHUNK = 900


@dataclass(frozen=True)
class StoredPassage:
    """One row to write: the faiss id, the corpus's own id (if any), title, text."""

    id: int
    doc_id: str | None
    title: str
    text: str
    synthetic: bool = False


def write_store(path: Path, rows: Iterable[StoredPassage]) -> int:
    """Create a new store at `path` (replacing none: the file must not exist); returns the count."""
    if path.exists():
        raise SearchIndexError(f"{path}: passage store already exists")
    conn = sqlite3.connect(path)
    try:
        conn.execute(_SCHEMA)
        cur = conn.executemany(
            "INSERT INTO passages (id, doc_id, title, text, synthetic) VALUES (?, ?, ?, ?, ?)",
            ((r.id, r.doc_id, r.title, r.text, int(r.synthetic)) for r in rows),
        )
        conn.commit()
        return cur.rowcount
    finally:
        conn.close()


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
            title, text, synthetic = rows[i]
            out.append(Passage(i, title, text, score=s, synthetic=bool(synthetic)))
        return Passages(tuple(out))

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def _fetch(self, ids: list[int]) -> dict[int, tuple[str, str, int]]:
        found: dict[int, tuple[str, str, int]] = {}
        with self._lock:
            for start in range(0, len(ids), _CHUNK):
                chunk = ids[start : start + _CHUNK]
                marks = ",".join("?" * len(chunk))
                query = f"SELECT id, title, text, synthetic FROM passages WHERE id IN ({marks})"
                for row in self._conn.execute(query, chunk):
                    found[row[0]] = (row[1], row[2], row[3])
        return found
