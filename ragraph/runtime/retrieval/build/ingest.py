"""Documents in: an index built from files and folders, and documents added or deleted in place.

The one path behind `ragraph index build --docs`, `index add`, `index delete` and the Python
API. Files are read (documents.py), cut by the embedder's tokens (chunking.py), embedded, and
stored with their origin (source path, character span) beside each passage. `add_documents`
embeds with the embedder and chunking the index records, replaces the passages of a document
already in the index (a changed file is added again), and commits the next version (update.py);
`delete_documents` removes documents by path (a folder: everything under it) or passages by id.
Every change reports the lists' balance and says when to retrain.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ragraph.errors import ConfigError, SearchIndexError
from ragraph.ir.values import Origin
from ragraph.runtime.retrieval.build.builder import BuildConfig, CorpusRecord, passage_text
from ragraph.runtime.retrieval.build.builder import build_index as build_from_records
from ragraph.runtime.retrieval.build.chunking import ChunkConfig, Chunker
from ragraph.runtime.retrieval.build.documents import Skipped, find_documents, read_documents
from ragraph.runtime.retrieval.build.update import Balance, commit_change
from ragraph.runtime.retrieval.embed.spec import EmbedderSpec
from ragraph.runtime.retrieval.manifest import Manifest
from ragraph.runtime.retrieval.store import existing_ids, ids_of_sources

# progress(total) -> advance(n): how the CLI's bar (and any caller) follows embedding.
Progress = Callable[[int], Callable[[int], None]]


@dataclass(frozen=True)
class Cut:
    """Documents read and cut into passages, and the files left out (with why)."""

    records: tuple[CorpusRecord, ...]
    sources: tuple[str, ...]
    skipped: tuple[Skipped, ...]
    other_kinds: tuple[Path, ...]


@dataclass(frozen=True)
class IndexReport:
    """What a build or a change did: the index's manifest now, documents read, passages added
    and deleted, documents replaced, files skipped, and the lists' balance (None after a build:
    freshly trained)."""

    directory: Path
    manifest: Manifest
    documents: int
    added: int
    deleted: int
    replaced: tuple[str, ...] = ()
    skipped: tuple[Skipped, ...] = ()
    other_kinds: tuple[Path, ...] = ()
    balance: Balance | None = None


def passage_embedder(model: str | None = None, url: str | None = None,
                     query_prompt: str | None = None, passage_prompt: str | None = None,
                     query_precision: str | None = None):
    """The embedder an index is built with: a local sentence-transformers model (`model`: a
    directory or a cached name; default all-MiniLM-L6-v2), or the `url` embeddings server.
    `query_precision`: what the index records for its queries (None: the model's default)."""
    if url is None:
        from ragraph.runtime.retrieval.embed.embedder import EMBEDDER_NAME, Embedder, EmbedderConfig

        return Embedder(EmbedderConfig(model=model or EMBEDDER_NAME, role="passage",
                                       query_prompt=query_prompt, passage_prompt=passage_prompt,
                                       query_precision=query_precision))
    from ragraph.runtime.retrieval.embed.http import HttpEmbedder, HttpEmbedderConfig

    return HttpEmbedder(HttpEmbedderConfig(url, model=model, role="passage",
                                           query_prompt=query_prompt or "",
                                           passage_prompt=passage_prompt or ""))


def cut_documents(paths: Sequence[Path], chunker: Chunker, skip_bad: bool = False) -> Cut:
    found = find_documents(paths)
    documents, skipped = read_documents(found.files, skip_bad)
    records: list[CorpusRecord] = []
    for doc in documents:
        for n, piece in enumerate(chunker.split(doc)):
            records.append(CorpusRecord(f"{doc.source}#{n}", doc.title, piece.text,
                                        Origin(doc.source, piece.start, piece.end)))
    return Cut(tuple(records), tuple(d.source for d in documents), tuple(skipped),
               found.other_kinds)


def build_index(paths: Sequence[Path], out: Path, *, embedder=None,
                chunk: ChunkConfig | None = None, config: BuildConfig | None = None,
                skip_bad: bool = False, progress: Progress | None = None) -> IndexReport:
    """A new index at `out` from the documents under `paths`. `embedder`: an embedder object
    (`passage_embedder`), a model name or directory, or None for all-MiniLM-L6-v2."""
    config = config or BuildConfig()
    embedder = passage_embedder(embedder) if embedder is None or isinstance(embedder, str) \
        else embedder
    chunker = Chunker(embedder.spec, chunk, getattr(embedder, "max_seq_length", None))
    cut = cut_documents(paths, chunker, skip_bad)
    config.clusters_for(len(cut.records))  # a bad nlist fails before minutes of embedding
    tick = progress(len(cut.records)) if progress is not None and cut.records else None
    manifest = build_from_records(list(cut.records), Path(out), config, embedder, tick,
                                  source=", ".join(str(p) for p in paths),
                                  chunking=(chunker.tokens, chunker.overlap))
    return IndexReport(Path(out), manifest, len(cut.sources), manifest.passages, 0,
                       skipped=cut.skipped, other_kinds=cut.other_kinds)


def add_documents(index: Path, paths: Sequence[Path] = (), *,
                  records: Sequence[CorpusRecord] = (), embedder_url: str | None = None,
                  skip_bad: bool = False, progress: Progress | None = None) -> IndexReport:
    """Add the documents under `paths` (and corpus `records`) to the index at `index`, embedded
    as its manifest says; a document already in the index has its passages replaced."""
    index = Path(index)
    manifest = Manifest.read(index)
    embedder = _embedder_of(manifest.embedder_spec, embedder_url)
    cut = Cut((), (), (), ())
    if paths:
        chunk = ChunkConfig(manifest.chunk_tokens, manifest.chunk_overlap)
        chunker = Chunker(embedder.spec, chunk, getattr(embedder, "max_seq_length", None))
        cut = cut_documents(paths, chunker, skip_bad)
    new = [*cut.records, *records]
    if not new:
        raise SearchIndexError("nothing to add: no passages in the documents or corpus given")
    tick = progress(len(new)) if progress is not None else None
    vectors = embedder.embed([passage_text(r) for r in new], progress=tick)
    replaced: list[str] = []

    def doomed(conn: sqlite3.Connection) -> list[int]:
        found = ids_of_sources(conn, cut.sources)
        replaced.extend(s for s, ids in found.items() if ids)
        return [i for ids in found.values() for i in ids]

    done = commit_change(index, new, vectors, doomed)
    return IndexReport(index, done.manifest, len(cut.sources), len(done.added),
                       len(done.deleted), tuple(replaced), cut.skipped, cut.other_kinds,
                       done.balance)


def delete_documents(index: Path, *, sources: Sequence[str | Path] = (),
                     ids: Sequence[int] = ()) -> IndexReport:
    """Delete the passages of the documents at `sources` (a folder: every document under it)
    and the passages `ids`; a source or id the index does not hold is an error naming it."""
    if not sources and not ids:
        raise ConfigError("delete", "give the documents' paths (sources) or passage ids")
    wanted = [str(Path(s).expanduser().resolve()) for s in sources]

    def doomed(conn: sqlite3.Connection) -> list[int]:
        found = ids_of_sources(conn, wanted)
        missing = [s for s, hits in found.items() if not hits]
        if missing:
            raise SearchIndexError(f"{index}: holds no documents from {', '.join(missing)}")
        unknown = sorted(set(ids) - existing_ids(conn, list(ids)))
        if unknown:
            raise SearchIndexError(f"{index}: holds no passages with ids "
                                   f"{', '.join(map(str, unknown[:10]))}")
        return [*ids, *(i for hits in found.values() for i in hits)]

    import numpy as np

    done = commit_change(Path(index), (), np.empty((0, 1), np.float32), doomed)
    return IndexReport(Path(index), done.manifest, len(wanted), 0, len(done.deleted),
                       balance=done.balance)


def _embedder_of(spec: EmbedderSpec, url: str | None):
    """The passage embedder the index's record describes (its model and prompts)."""
    from ragraph.runtime.retrieval.embed.spec import check_compatible

    if spec.source == "openai-http" and url is None:
        raise SearchIndexError(f"the index's embedder {spec.name!r} was served over HTTP; pass "
                               "--embedder-url with a server of that model")
    embedder = passage_embedder(spec.name if url is None else None, url, spec.query_prompt,
                                spec.passage_prompt, spec.query_precision)
    check_compatible(spec, embedder.spec, "the index")
    return embedder
