"""Build an index directory from a JSONL corpus: faiss IVF index, SQLite passage store, manifest.

Each corpus line is `{"id"?: str|int, "title": str, "text": str}`; a bad line is an error naming
file:line and the field. Records cut from documents (ingest.py) carry their origin too. The directory is written under a temporary name and renamed when complete,
so an interrupted build never leaves a directory that looks valid.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ragraph.errors import ConfigError, SearchIndexError
from ragraph.ir.values import Origin
from ragraph.runtime.retrieval.manifest import (
    INDEX_FILE,
    INDEX_TYPES,
    STORE_FILE,
    Manifest,
    Training,
    content_checksum,
)
from ragraph.runtime.retrieval.store import StoredPassage, write_store


class CorpusError(SearchIndexError):
    """A malformed corpus line: the message starts with file:line."""


@dataclass(frozen=True)
class CorpusRecord:
    doc_id: str | None
    title: str
    text: str
    origin: Origin | None = None  # where a document's passage was cut from (ingest.py)
    section: str = ""  # a Markdown passage's heading path as embedded (chunking.Chunker._section)


@dataclass(frozen=True)
class BuildConfig:
    """`nlist` None picks ~4·sqrt(n) clusters, with at least 39 training points each (faiss's rule)."""

    index_type: str = "ivf-flat"
    nlist: int | None = None
    metric: str = "ip"
    seed: int = 1234

    def __post_init__(self) -> None:
        if self.index_type not in INDEX_TYPES:
            raise ConfigError(
                "index_type", f"must be one of {INDEX_TYPES}, got {self.index_type!r}"
            )
        if self.nlist is not None and self.nlist < 1:
            raise ConfigError("nlist", f"must be at least 1, got {self.nlist}")
        if self.metric not in ("ip", "l2"):
            raise ConfigError("metric", f"must be 'ip' or 'l2', got {self.metric!r}")

    def clusters_for(self, n: int) -> int:
        if self.index_type == "flat":
            return 1  # exhaustive search: one list, so the stepwise engine serves it unchanged
        if self.nlist is not None:
            if self.nlist > n:
                raise ConfigError("nlist", f"{self.nlist} clusters for only {n} passages")
            return self.nlist
        return max(1, min(int(4 * math.sqrt(n)), n // 39))


def read_corpus(path: Path) -> Iterator[CorpusRecord]:
    """Parse a JSONL corpus, one record per non-blank line."""
    try:
        handle = path.open(encoding="utf-8")
    except OSError as err:
        raise CorpusError(f"{path}: cannot read corpus ({err.strerror})") from err
    with handle:
        try:
            for lineno, line in enumerate(handle, start=1):
                if line.strip():
                    yield _parse_line(f"{path}:{lineno}", line)
        except UnicodeDecodeError as err:
            raise CorpusError(f"{path}: not UTF-8 JSONL text ({err.reason})") from err


def _parse_line(where: str, line: str) -> CorpusRecord:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as err:
        raise CorpusError(f"{where}: not valid JSON ({err.msg} at column {err.colno})") from err
    if not isinstance(obj, dict):
        raise CorpusError(f"{where}: expected a JSON object with 'title' and 'text'")
    for name in ("title", "text"):
        if name not in obj:
            raise CorpusError(f"{where}: field {name!r} is missing")
        if not isinstance(obj[name], str):
            raise CorpusError(f"{where}: field {name!r} must be a string")
    if not obj["text"].strip():
        raise CorpusError(f"{where}: field 'text' is empty")
    doc_id = obj.get("id")
    if doc_id is not None and (not isinstance(doc_id, str | int) or isinstance(doc_id, bool)):
        raise CorpusError(f"{where}: field 'id' must be a string or an integer")
    return CorpusRecord(None if doc_id is None else str(doc_id), obj["title"], obj["text"])


def passage_text(record: CorpusRecord) -> str:
    """What is embedded: title and text, as DPR-style retrievers embed Wikipedia passages, with a
    Markdown passage's section after the title."""
    if record.section:
        return f"{record.title} > {record.section}. {record.text}"
    return f"{record.title}. {record.text}" if record.title else record.text


def build_index(
    records: Sequence[CorpusRecord],
    out: Path,
    config: BuildConfig,
    embedder,
    progress: Callable[[int], None] | None = None,
    source: str = "",
    chunking: tuple[int, int] | None = None,
) -> Manifest:
    """Embed `records`, train and fill the index, write store and manifest into `out`;
    `chunking`: the chunk tokens and overlap documents were cut with, for later additions."""
    if not records:
        raise CorpusError(f"{source or 'corpus'}: no passages")
    if out.exists() and any(out.iterdir()):
        raise SearchIndexError(f"{out}: output directory exists and is not empty")
    vectors = embedder.embed([passage_text(r) for r in records], progress=progress)
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    index = train_and_fill(vectors, config)
    import faiss

    faiss.write_index(index, str(tmp / INDEX_FILE))
    rows = (StoredPassage(i, r.doc_id, r.title, r.text, origin=r.origin)
            for i, r in enumerate(records))
    write_store(tmp / STORE_FILE, rows)
    if int(vectors.shape[1]) != embedder.spec.dim:
        raise SearchIndexError(f"embedder {embedder.name!r} gave {vectors.shape[1]}-dimensional "
                               f"vectors, not {embedder.spec.dim}")
    manifest = Manifest(
        embedder=embedder.spec.name,
        dim=embedder.spec.dim,
        metric=config.metric,
        nlist=int(index.nlist),
        index_type=config.index_type,
        passages=len(records),
        checksum=content_checksum(index),
        source=source,
        embedding=embedder.spec,
        next_id=len(records),
        training=Training(len(records), float(index.invlists.imbalance_factor())),
        chunk_tokens=chunking[0] if chunking else None,
        chunk_overlap=chunking[1] if chunking else None,
    )
    manifest.write(tmp)
    if out.exists():
        out.rmdir()
    tmp.rename(out)
    return manifest


def train_and_fill(vectors: np.ndarray, config: BuildConfig):
    """A trained faiss IVF index holding `vectors` with ids 0..n-1."""
    import faiss

    n, d = vectors.shape
    metric = faiss.METRIC_INNER_PRODUCT if config.metric == "ip" else faiss.METRIC_L2
    nlist = config.clusters_for(n)
    quantizer = faiss.IndexFlat(d, metric)
    if config.index_type == "sq8":
        index = faiss.IndexIVFScalarQuantizer(
            quantizer, d, nlist, faiss.ScalarQuantizer.QT_8bit, metric, False
        )
    else:
        index = faiss.IndexIVFFlat(quantizer, d, nlist, metric)
    index.cp.seed = config.seed
    index.train(vectors)
    index.add_with_ids(vectors, np.arange(n, dtype=np.int64))
    return index
