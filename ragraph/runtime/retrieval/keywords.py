"""The passage store's keyword index and filters: SQLite FTS5 over each passage's title and
text, ranked by FTS5's `bm25()`, and the ids a `Where` allows.

The FTS5 table is an external-content table over `passages` (it stores the index, not a second
copy of the text), kept in step by triggers: every insert and delete of a passage, by the build,
`index add` or `index delete`, changes both in one transaction. Synthetic padding passages are
left out (they are never shown as evidence). A store written before the keyword index existed
gets it from `add_keyword_index` (`ragraph index keywords`, or any `index add`/`delete`).

The porter stemmer over unicode61 matches "propagate" with "propagation"; a question becomes an
OR of its words, each quoted, so FTS5's query syntax in user text ("?", "AND", "-") is only text.
"""

from __future__ import annotations

import re
import sqlite3

from ragraph.errors import ConfigError, SearchIndexError
from ragraph.runtime.retrieval.options import Where

FTS_TABLE = "passages_fts"
_DDL = (
    f"CREATE VIRTUAL TABLE {FTS_TABLE} USING fts5(title, text, content='passages', "
    "content_rowid='id', tokenize='porter unicode61')",
    f"CREATE TRIGGER {FTS_TABLE}_insert AFTER INSERT ON passages WHEN new.synthetic = 0 BEGIN "
    f"INSERT INTO {FTS_TABLE}(rowid, title, text) VALUES (new.id, new.title, new.text); END",
    f"CREATE TRIGGER {FTS_TABLE}_delete AFTER DELETE ON passages WHEN old.synthetic = 0 BEGIN "
    f"INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, title, text) "
    "VALUES ('delete', old.id, old.title, old.text); END",
)
_WORD = re.compile(r"\w+")


def create_keyword_index(conn: sqlite3.Connection) -> None:
    """The FTS5 table and its triggers, on a store with no passages yet."""
    for statement in _DDL:
        conn.execute(statement)


def has_keyword_index(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                        (FTS_TABLE,)).fetchone() is not None


def add_keyword_index(conn: sqlite3.Connection) -> bool:
    """Give a store without a keyword index one, indexing the passages it holds (the caller
    commits); False when it had one already."""
    if has_keyword_index(conn):
        return False
    create_keyword_index(conn)
    conn.execute(f"INSERT INTO {FTS_TABLE}(rowid, title, text) "
                 "SELECT id, title, text FROM passages WHERE synthetic = 0")
    return True


def match_query(text: str) -> str | None:
    """An FTS5 query matching any word of `text` (None: it has no words)."""
    words = sorted(set(_WORD.findall(text.lower())))
    return " OR ".join(f'"{w}"' for w in words) if words else None


def keyword_ids(conn: sqlite3.Connection, text: str, k: int,
                where: Where | None, columns: frozenset[str]) -> list[int]:
    """The ids of the `k` passages best for `text` by BM25, best first (ties: smaller id),
    among those `where` allows."""
    query = match_query(text)
    if query is None:
        return []
    clause, args = where_clause(where, columns, "p.")
    sql = (f"SELECT f.rowid FROM {FTS_TABLE} f JOIN passages p ON p.id = f.rowid "
           f"WHERE {FTS_TABLE} MATCH ?{' AND ' + clause if clause else ''} "
           f"ORDER BY bm25({FTS_TABLE}), f.rowid LIMIT ?")
    return [row[0] for row in conn.execute(sql, (query, *args, k))]


def allowed_ids(conn: sqlite3.Connection, where: Where, columns: frozenset[str]) -> list[int]:
    """The ids of the passages `where` allows, ascending."""
    clause, args = where_clause(where, columns, "")
    return [row[0] for row in conn.execute(
        f"SELECT id FROM passages WHERE {clause} ORDER BY id", args)]


def where_clause(where: Where | None, columns: frozenset[str],
                 prefix: str) -> tuple[str, list[str | int]]:
    """SQL conditions for `where` over the store's `columns` (a field it lacks is an error
    naming it and the fields there are)."""
    if where is None:
        return "", []
    terms, args = [], []
    if where.source is not None:
        if "source" not in columns:
            raise ConfigError("filter.source", "this index's passages have no source (it was "
                              "built from a corpus, not from documents)")
        terms.append(f"{prefix}source GLOB ?")
        args.append(where.source)
    for name, value in where.fields:
        if name not in columns:
            raise ConfigError(f"filter.{name}", "the passage store has no such field; it has: "
                              + ", ".join(sorted(columns)))
        terms.append(f'{prefix}"{name}" = ?')
        args.append(value)
    return " AND ".join(terms), args


def missing_keyword_index(path: object) -> SearchIndexError:
    return SearchIndexError(
        f"{path}: this index has no keyword index (it was built before hybrid search); add it "
        "with `ragraph index keywords INDEX_DIR`")
