"""Changing an index in place: the next version written beside the current one, then committed.

One writer at a time (an exclusive lock file in the index directory). The writer reads the
current version, removes and adds vectors on the trained IVF index (faiss `remove_ids`,
`add_with_ids`: the centroids stay as trained), copies the passage store with SQLite's backup API
and changes the copy in one transaction, writes both under the next version's names and only then
replaces `manifest.json` (manifest.py). Readers that opened the old version keep it (faiss holds
it in memory; an open SQLite file outlives its name); readers that open afterwards get the new
one. The version before the current one stays on disk for readers between reading the manifest
and opening its files; older ones are removed.

Vectors added after training land in the lists of their nearest trained centroid, so lists grow
unevenly when new documents are unlike the old. `Balance` reports it after every change, with
faiss's imbalance factor (1 when all lists are equal), and says when to retrain.
"""

from __future__ import annotations

import contextlib
import fcntl
import re
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ragraph.errors import SearchIndexError
from ragraph.runtime.durable import fsync_path
from ragraph.runtime.retrieval.build.builder import CorpusRecord
from ragraph.runtime.retrieval.keywords import add_keyword_index, has_keyword_index
from ragraph.runtime.retrieval.manifest import (
    Manifest,
    Training,
    check_index,
    content_checksum,
    read_faiss,
)
from ragraph.runtime.retrieval.store import (
    StoredPassage,
    add_origin_columns,
    delete_rows,
    insert_rows,
)

# Retrain when the lists are this much more uneven than when the centroids were trained (a
# search's cost follows its largest probed lists)...
IMBALANCE_GROWTH = 1.5
# ...or when this share of the trained passages has been added or deleted since: the centroids
# then describe a collection that is largely gone.
CHANGED_SHARE = 0.5
LOCK_FILE = ".update.lock"
_VERSIONED = re.compile(r"^(?:index\.v(\d+)\.faiss|passages\.v(\d+)\.sqlite)$")


@dataclass(frozen=True)
class Balance:
    """The lists after a change: their count, the largest and mean length, faiss's imbalance
    factor, and the state the centroids were trained on."""

    lists: int
    largest: int
    mean: float
    imbalance: float
    trained: Training

    @property
    def retrain(self) -> str | None:
        """Why the index should be rebuilt (`ragraph index build`), or None."""
        if self.imbalance >= IMBALANCE_GROWTH * self.trained.imbalance:
            return (f"lists are uneven: imbalance {self.imbalance:.2f}, "
                    f"{self.trained.imbalance:.2f} when trained (retrain at "
                    f"{IMBALANCE_GROWTH}x)")
        if self.trained.changed >= CHANGED_SHARE * self.trained.passages:
            return (f"{self.trained.changed} passages added or deleted since training on "
                    f"{self.trained.passages} (retrain at {CHANGED_SHARE:.0%})")
        return None

    def describe(self) -> str:
        line = (f"{self.lists} lists, largest {self.largest}, mean {self.mean:.1f}, imbalance "
                f"{self.imbalance:.2f} ({self.trained.imbalance:.2f} when trained, "
                f"{self.trained.changed} passages changed since)")
        reason = self.retrain
        return line + (f"; rebuild with `ragraph index build`: {reason}" if reason else "")


def balance_of(index, trained: Training) -> Balance:
    sizes = np.array([index.invlists.list_size(c) for c in range(index.nlist)], np.int64)
    return Balance(int(index.nlist), int(sizes.max()), float(sizes.mean()),
                   float(index.invlists.imbalance_factor()), trained)


@dataclass(frozen=True)
class Committed:
    manifest: Manifest
    added: tuple[int, ...]  # the new passages' ids
    deleted: tuple[int, ...]
    balance: Balance


def commit_change(directory: Path, records: Sequence[CorpusRecord], vectors: np.ndarray,
                  doomed: Callable[[sqlite3.Connection], Sequence[int]]) -> Committed:
    """Delete the ids `doomed(store)` names and add `records` with their `vectors`, as the next
    version of the index in `directory`."""
    directory = Path(directory)
    with _writer_lock(directory):
        current = Manifest.read(directory)
        index = read_faiss(current.index_path(directory))
        check_index(current.index_path(directory), index, current)
        if len(records) and vectors.shape[1] != current.dim:
            raise SearchIndexError(f"{directory}: holds {current.dim}-dimensional vectors, the "
                                   f"new passages are {vectors.shape[1]}-dimensional")
        base = current.training or Training(current.passages,
                                            float(index.invlists.imbalance_factor()))
        following = replace(current, version=current.version + 1)
        paths = (following.index_path(directory), following.store_path(directory))
        try:
            deleted, added = _change_files(current, following, directory, index, records,
                                           vectors, doomed)
            training = replace(base, changed=base.changed + len(deleted) + len(added))
            final = replace(following, passages=int(index.ntotal), training=training,
                            checksum=content_checksum(index),
                            next_id=current.first_free_id + len(added))
            final.write(directory)
        except BaseException:
            for path in paths:
                path.unlink(missing_ok=True)
            raise
        _remove_older(directory, final.version - 1)
        return Committed(final, added, deleted, balance_of(index, training))


def add_keywords(directory: Path) -> Committed | None:
    """Give the index in `directory` its keyword index, as its next version (None: it has one
    already)."""
    current = Manifest.read(Path(directory))
    conn = sqlite3.connect(f"file:{current.store_path(Path(directory))}?mode=ro", uri=True)
    try:
        if has_keyword_index(conn):
            return None
    finally:
        conn.close()
    return commit_change(directory, (), np.empty((0, current.dim), np.float32), lambda _: ())


def _change_files(current: Manifest, following: Manifest, directory: Path, index,
                  records: Sequence[CorpusRecord], vectors: np.ndarray,
                  doomed: Callable[[sqlite3.Connection], Sequence[int]]
                  ) -> tuple[tuple[int, ...], tuple[int, ...]]:
    import faiss

    store_path = following.store_path(directory)
    store_path.unlink(missing_ok=True)  # a crashed writer's leftover, never committed
    _copy_store(current.store_path(directory), store_path)
    conn = sqlite3.connect(store_path)
    try:
        add_origin_columns(conn)
        add_keyword_index(conn)  # a store from before hybrid search gets it with any change
        deleted = tuple(sorted(set(doomed(conn))))
        if deleted:
            index.remove_ids(np.asarray(deleted, dtype=np.int64))
            delete_rows(conn, deleted)
        first = current.first_free_id
        added = tuple(range(first, first + len(records)))
        if added:
            index.add_with_ids(np.ascontiguousarray(vectors, dtype=np.float32),
                               np.asarray(added, dtype=np.int64))
            insert_rows(conn, (StoredPassage(i, r.doc_id, r.title, r.text, origin=r.origin)
                               for i, r in zip(added, records, strict=True)))
        if index.ntotal == 0:
            raise SearchIndexError(f"{directory}: the change would leave the index without "
                                   "passages")
        conn.commit()
    finally:
        conn.close()
    index_path = following.index_path(directory)
    faiss.write_index(index, str(index_path))
    fsync_path(index_path)
    return deleted, added


def _copy_store(source: Path, target: Path) -> None:
    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    dst = sqlite3.connect(target)
    try:
        src.backup(dst)
    finally:
        dst.close()
        src.close()


def _remove_older(directory: Path, keep_from: int) -> None:
    """Remove the files of versions before `keep_from` (version 0's unversioned names too)."""
    for path in directory.iterdir():
        match = _VERSIONED.match(path.name)
        version = (int(match.group(1) or match.group(2)) if match
                   else 0 if path.name in ("index.faiss", "passages.sqlite") else None)
        if version is not None and version < keep_from:
            path.unlink(missing_ok=True)


def _writer_lock(directory: Path) -> contextlib.AbstractContextManager[None]:
    if not directory.is_dir():
        raise SearchIndexError(f"{directory}: index directory does not exist")
    return locked(directory / LOCK_FILE)


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock on `path` across processes, held for the block."""
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
