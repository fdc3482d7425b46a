"""The real passages of the benchmark index and their embeddings, cached once per user.

Sources: the embedded default Wikipedia index (its vectors are read back from the IVF-Flat lists,
not re-embedded) plus the gold/distractor corpora in the shared data folder (NQ oracle, HotpotQA,
MuSiQue, 2WikiMultihopQA) through `ragraph.eval.load_corpus`. A missing file is skipped with a note.
The cache key is the content hash of every source, so new data rebuilds it and nothing else does.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# (file in the data folder, label): passages of these corpora answer the benchmark questions.
DATA_CORPORA: tuple[tuple[str, str], ...] = (
    ("nq-open-oracle.jsonl.gz", "nq-oracle"),
    ("hotpotqa_train_corpus.json", "hotpotqa"),
    ("musique_train_corpus.json", "musique"),
    ("2wikimultihopqa_corpus.json", "2wiki"),
)
VERSION = 1  # bump when the way passages are chosen or embedded changes


@dataclass(frozen=True)
class RealPassage:
    doc_id: str
    title: str
    text: str


@dataclass(frozen=True)
class RealBase:
    key: str  # content hash of the sources
    passages: tuple[RealPassage, ...]
    vectors: np.ndarray  # (n, d) float32, row i embeds passages[i]
    counts: dict[str, int]  # passages per source
    notes: tuple[str, ...]  # skipped sources


def source_files(data: Path | None) -> tuple[list[tuple[Path, str]], list[str]]:
    """The data corpora present, and a note for each one that is not."""
    present, notes = [], []
    for name, label in DATA_CORPORA:
        path = data / name if data is not None else None
        if path is not None and path.is_file():
            present.append((path, label))
        else:
            notes.append(f"{name}: not found under {data}; skipped")
    return present, notes


def ensure_real_base(data: Path | None, cache: Path,
                     progress: Callable[[str, int], Callable[[int], None]] | None = None,
                     embed: bool = True) -> RealBase:
    """Load the cached real base for these sources, building it first when missing.

    With `embed` False (--quick) the data corpora are used only if already embedded: embedding
    ~12k passages takes minutes on 2 cores, so a first quick run indexes the Wikipedia passages
    alone (the simulated engine's timing does not depend on which passages are retrieved)."""
    from ragraph.runtime.retrieval.build.corpus import ensure_default_index

    default = ensure_default_index()
    key, directory, files, notes = _locate(data, cache, embed, default.manifest.checksum)
    if not (directory / "meta.json").is_file():
        _build(directory, default, files, progress)
    meta = json.loads((directory / "meta.json").read_text())
    rows = json.loads((directory / "passages.json").read_text())
    passages = tuple(RealPassage(*row) for row in rows)
    vectors = np.load(directory / "vectors.npy")
    return RealBase(key, passages, vectors, meta["counts"], tuple(notes))


def cached_base(data: Path | None, cache: Path, embed: bool = True) -> tuple[str, int] | None:
    """The key and passage count of the real base `ensure_real_base` would load, where it and
    the default index are built already; None where loading it would build something."""
    from ragraph.runtime.retrieval.build.corpus import current_default_manifest

    default = current_default_manifest()
    if default is None:
        return None
    key, directory, _, _ = _locate(data, cache, embed, default.checksum)
    if not (directory / "meta.json").is_file():
        return None
    return key, sum(json.loads((directory / "meta.json").read_text())["counts"].values())


def _locate(data: Path | None, cache: Path, embed: bool,
            default_checksum: str) -> tuple[str, Path, list[tuple[Path, str]], list[str]]:
    """The real base's key, its folder, the data files it embeds and the notes on them."""
    files, notes = source_files(data)
    key = _key(default_checksum, files)
    directory = cache / f"real-{key[:16]}"
    if not (directory / "meta.json").is_file() and files and not embed:
        notes.append("data corpora not embedded yet (a run without --quick embeds and caches "
                     "them): this index holds the Wikipedia passages only")
        files = []
        key = _key(default_checksum, files)
        directory = cache / f"real-{key[:16]}"
    return key, directory, files, notes


def _key(default_checksum: str, files: list[tuple[Path, str]]) -> str:
    h = hashlib.sha256(f"v{VERSION}:{default_checksum}".encode())
    for path, label in files:
        h.update(label.encode())
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def _build(directory: Path, default, files, progress) -> None:
    passages, vectors = _default_passages(default)
    counts = {"wikipedia": len(passages)}
    seen = {(p.title, p.text) for p in passages}
    extra: list[RealPassage] = []
    for path, label in files:
        from ragraph.eval import load_corpus

        fresh = [p for p in load_corpus(path) if (p.title, p.text) not in seen]
        seen.update((p.title, p.text) for p in fresh)
        extra += [RealPassage(f"{label}#{i}", p.title, p.text) for i, p in enumerate(fresh)]
        counts[label] = len(fresh)
    if extra:
        vectors = np.concatenate([vectors, _embed(extra, progress)])
    tmp = directory.with_name(directory.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    np.save(tmp / "vectors.npy", vectors.astype(np.float32))
    rows = [[p.doc_id, p.title, p.text] for p in passages + extra]
    (tmp / "passages.json").write_text(json.dumps(rows, ensure_ascii=False))
    (tmp / "meta.json").write_text(json.dumps({"counts": counts, "version": VERSION}))
    shutil.rmtree(directory, ignore_errors=True)
    tmp.rename(directory)


def _default_passages(default) -> tuple[list[RealPassage], np.ndarray]:
    """The default index's passages (store rows) and vectors (read back from the IVF lists)."""
    import faiss

    ivf = faiss.extract_index_ivf(default.engine.index)
    ivf.make_direct_map()
    vectors = ivf.reconstruct_n(0, ivf.ntotal)
    store = default.directory / "passages.sqlite"
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT id, doc_id, title, text FROM passages ORDER BY id").fetchall()
    finally:
        conn.close()
    return [RealPassage(str(doc or i), title, text) for i, doc, title, text in rows], vectors


def _embed(passages: list[RealPassage], progress) -> np.ndarray:
    from ragraph.runtime.retrieval.build.builder import CorpusRecord, passage_text
    from ragraph.runtime.retrieval.embed.embedder import Embedder

    tick = progress("embedding data corpora", len(passages)) if progress else None
    texts = [passage_text(CorpusRecord(p.doc_id, p.title, p.text)) for p in passages]
    return Embedder().embed(texts, progress=tick)
