"""An index directory's manifest, and loading a directory only after it checks out.

`manifest.json` records what the index was built from (embedder, dimension, metric, nlist, index
type, passage count) and a checksum of its content (ids and codes of every inverted list, in order).
`load_index` compares the files with it before handing faiss anything it could crash on, so a wrong
directory, a truncated file or an index built by another embedder is an error naming the file.
`embedding` is the embedder's whole record (embedder_spec.py: model, dimension, prompts,
normalization); `embedder` and `dim` repeat its name and dimension for readers that know only
those. A manifest written before the record existed is read as all-MiniLM-L6-v2's.

`version` counts the in-place changes (`ragraph index add|delete`, update.py): version 0 is a
build's `index.faiss` and `passages.sqlite`, version n names `index.vN.faiss` and
`passages.vN.sqlite`. A change writes the new version's files beside the old ones and then
replaces `manifest.json` in one rename, so a reader that reads the manifest first opens either the
old version or the new one, never half of each (`load_index` retries when a change removed the
files it was about to open). `next_id` is the first id never used (ids are not reused after a
delete); `training` records the index's state when its centroids were trained, for drift.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from ragraph.errors import SearchIndexError
from ragraph.runtime.retrieval.embed.spec import EmbedderSpec, legacy

MANIFEST = "manifest.json"
INDEX_FILE = "index.faiss"
STORE_FILE = "passages.sqlite"
FORMAT_VERSION = 1
INDEX_TYPES = ("ivf-flat", "flat", "sq8")


@dataclass(frozen=True)
class Training:
    """The index when its centroids were trained: its passages, its lists' imbalance factor
    (faiss's: 1 when all lists are equal), and how many passages were added or deleted since."""

    passages: int
    imbalance: float
    changed: int = 0


@dataclass(frozen=True)
class Manifest:
    embedder: str
    dim: int
    metric: str
    nlist: int
    index_type: str
    passages: int
    checksum: str
    source: str = ""
    format_version: int = FORMAT_VERSION
    embedding: EmbedderSpec | None = None  # None only in manifests written before it existed
    version: int = 0
    next_id: int | None = None  # None in manifests before updates existed: ids were 0..n-1
    training: Training | None = None  # None: written by a build that did not record it
    chunk_tokens: int | None = None  # how documents were cut (chunking.py); None: no documents
    chunk_overlap: int | None = None

    def __post_init__(self) -> None:
        if self.embedding is None:
            object.__setattr__(self, "embedding", legacy(self.embedder, self.dim))

    @property
    def first_free_id(self) -> int:
        return self.passages if self.next_id is None else self.next_id

    def index_path(self, directory: Path) -> Path:
        return directory / (INDEX_FILE if self.version == 0 else f"index.v{self.version}.faiss")

    def store_path(self, directory: Path) -> Path:
        return directory / (STORE_FILE if self.version == 0
                            else f"passages.v{self.version}.sqlite")

    @property
    def embedder_spec(self) -> EmbedderSpec:
        return self.embedding or legacy(self.embedder, self.dim)

    def write(self, directory: Path) -> None:
        """Write `manifest.json` whole or not at all: a reader never sees a partial one."""
        text = json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"
        tmp = directory / (MANIFEST + ".tmp")
        with tmp.open("w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, directory / MANIFEST)

    @staticmethod
    def read(directory: Path) -> Manifest:
        path = directory / MANIFEST
        if not directory.is_dir():
            raise SearchIndexError(f"{directory}: index directory does not exist")
        if not path.is_file():
            raise SearchIndexError(f"{path}: missing; not a ragraph index directory")
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise SearchIndexError(f"{path}: unreadable manifest ({err})") from err
        return _from_json(path, raw)


_NULLABLE = ("next_id", "chunk_tokens", "chunk_overlap")


def _from_json(path: Path, raw: object) -> Manifest:
    if not isinstance(raw, dict):
        raise SearchIndexError(f"{path}: expected a JSON object")
    values: dict = {}
    for f in fields(Manifest):
        if f.name in ("embedding", "training"):
            continue
        if f.name not in raw or (f.name in _NULLABLE and raw[f.name] is None):
            if f.name in _NULLABLE or f.name in ("source", "version"):
                continue
            raise SearchIndexError(f"{path}: field {f.name!r} is missing")
        want = int if f.type in ("int", int, "int | None") else str
        if not isinstance(raw[f.name], want) or isinstance(raw[f.name], bool):
            raise SearchIndexError(f"{path}: field {f.name!r} must be {want.__name__}")
        values[f.name] = raw[f.name]
    if "embedding" in raw:
        values["embedding"] = _embedding(path, raw["embedding"], values)
    if raw.get("training") is not None:
        values["training"] = _training(path, raw["training"])
    manifest = Manifest(**values)
    if manifest.format_version != FORMAT_VERSION:
        raise SearchIndexError(
            f"{path}: format version {manifest.format_version}, this ragraph reads {FORMAT_VERSION}"
        )
    if manifest.index_type not in INDEX_TYPES:
        raise SearchIndexError(f"{path}: field 'index_type' must be one of {INDEX_TYPES}")
    return manifest


def _embedding(path: Path, raw: object, values: dict) -> EmbedderSpec:
    spec = EmbedderSpec.from_json(str(path), raw)
    if spec.name != values["embedder"] or spec.dim != values["dim"]:
        raise SearchIndexError(f"{path}: field 'embedding' names {spec.name!r} (dim {spec.dim}), "
                               f"'embedder' and 'dim' say {values['embedder']!r} ({values['dim']})")
    return spec


def _training(path: Path, raw: object) -> Training:
    kinds = {"passages": int, "imbalance": float, "changed": int}
    if not isinstance(raw, dict) or set(raw) != set(kinds):
        raise SearchIndexError(f"{path}: field 'training' must be an object with {sorted(kinds)}")
    for key, want in kinds.items():
        if not isinstance(raw[key], want | int) or isinstance(raw[key], bool):
            raise SearchIndexError(f"{path}: field 'training.{key}' must be {want.__name__}")
    return Training(int(raw["passages"]), float(raw["imbalance"]), int(raw["changed"]))


def content_checksum(ivf) -> str:
    """sha256 over every inverted list's ids and codes, in list order."""
    import faiss

    h = hashlib.sha256()
    for c in range(ivf.nlist):
        n = ivf.invlists.list_size(c)
        h.update(n.to_bytes(8, "little"))
        if n:
            h.update(faiss.rev_swig_ptr(ivf.invlists.get_ids(c), n).tobytes())
            h.update(faiss.rev_swig_ptr(ivf.invlists.get_codes(c), n * ivf.code_size).tobytes())
    return h.hexdigest()


@dataclass(frozen=True)
class LoadedIndex:
    """A checked index directory: its manifest, a stepwise engine over it, and its passages."""

    directory: Path
    manifest: Manifest
    engine: object  # FaissIVFEngine
    store: object  # PassageStore


# How often a reader re-reads the manifest when changes keep replacing the version it opens.
_OPEN_TRIES = 5


def load_index(directory: Path, embedder_name: str | None = None, dim: int | None = None):
    """Open `directory`'s current version after checking every file against the manifest (and
    the embedder, if given)."""
    from ragraph.runtime.retrieval.embed.embedder import check_embedder

    directory = Path(directory)
    for _ in range(_OPEN_TRIES):
        manifest = Manifest.read(directory)
        if embedder_name is not None:
            check_embedder(manifest.embedder, manifest.dim, embedder_name, dim or manifest.dim)
        try:
            return _open_version(directory, manifest)
        except SearchIndexError:
            if Manifest.read(directory) == manifest:
                raise
            # `ragraph index add|delete` committed a new version (and removed this one's files)
            # between reading the manifest and opening them: open the new one.
    raise SearchIndexError(f"{directory}: changed {_OPEN_TRIES} times while being opened")


def _open_version(directory: Path, manifest: Manifest) -> LoadedIndex:
    from ragraph.runtime.retrieval.ivf.engine import FaissIVFEngine
    from ragraph.runtime.retrieval.store import PassageStore

    index_path, store_path = manifest.index_path(directory), manifest.store_path(directory)
    index = read_faiss(index_path)
    check_index(index_path, index, manifest)
    store = PassageStore(store_path)
    if len(store) != manifest.passages:
        store.close()
        raise SearchIndexError(
            f"{store_path}: holds {len(store)} passages, the manifest says {manifest.passages}"
        )
    return LoadedIndex(directory, manifest, FaissIVFEngine(index), store)


def read_faiss(path: Path):
    import faiss

    if not path.is_file():
        raise SearchIndexError(f"{path}: index file is missing")
    try:
        return faiss.read_index(str(path))
    except RuntimeError as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else "unreadable"
        raise SearchIndexError(f"{path}: not a readable faiss index ({first})") from err


def check_index(path: Path, index, manifest: Manifest) -> None:
    import faiss

    if not isinstance(index, faiss.IndexIVF):
        raise SearchIndexError(f"{path}: expected an IVF index, found {type(index).__name__}")
    found = {
        "dim": int(index.d),
        "nlist": int(index.nlist),
        "passages": int(index.ntotal),
        "metric": "ip" if index.metric_type == faiss.METRIC_INNER_PRODUCT else "l2",
    }
    for name, value in found.items():
        if value != getattr(manifest, name):
            raise SearchIndexError(
                f"{path}: {name} is {value}, but {MANIFEST} says {getattr(manifest, name)}"
            )
    if content_checksum(index) != manifest.checksum:
        raise SearchIndexError(f"{path}: content checksum does not match {MANIFEST}")
