"""An index directory's manifest, and loading a directory only after it checks out.

`manifest.json` records what the index was built from (embedder, dimension, metric, nlist, index
type, passage count) and a checksum of its content (ids and codes of every inverted list, in order).
`load_index` compares the files with it before handing faiss anything it could crash on, so a wrong
directory, a truncated file or an index built by another embedder is an error naming the file.
`embedding` is the embedder's whole record (embedder_spec.py: model, dimension, prompts,
normalization); `embedder` and `dim` repeat its name and dimension for readers that know only
those. A manifest written before the record existed is read as all-MiniLM-L6-v2's.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from ragraph.errors import SearchIndexError
from ragraph.runtime.retrieval.embedder_spec import EmbedderSpec, legacy

MANIFEST = "manifest.json"
INDEX_FILE = "index.faiss"
STORE_FILE = "passages.sqlite"
FORMAT_VERSION = 1
INDEX_TYPES = ("ivf-flat", "flat", "sq8")


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

    def __post_init__(self) -> None:
        if self.embedding is None:
            object.__setattr__(self, "embedding", legacy(self.embedder, self.dim))

    @property
    def embedder_spec(self) -> EmbedderSpec:
        return self.embedding or legacy(self.embedder, self.dim)

    def write(self, directory: Path) -> None:
        text = json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"
        (directory / MANIFEST).write_text(text, encoding="utf-8")

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


def _from_json(path: Path, raw: object) -> Manifest:
    if not isinstance(raw, dict):
        raise SearchIndexError(f"{path}: expected a JSON object")
    values: dict = {}
    for f in fields(Manifest):
        if f.name == "embedding":
            continue
        if f.name not in raw:
            if f.name in ("source",):
                continue
            raise SearchIndexError(f"{path}: field {f.name!r} is missing")
        want = int if f.type in ("int", int) else str
        if not isinstance(raw[f.name], want) or isinstance(raw[f.name], bool):
            raise SearchIndexError(f"{path}: field {f.name!r} must be {want.__name__}")
        values[f.name] = raw[f.name]
    if "embedding" in raw:
        values["embedding"] = _embedding(path, raw["embedding"], values)
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


def load_index(directory: Path, embedder_name: str | None = None, dim: int | None = None):
    """Open `directory` after checking every file against the manifest (and the embedder, if given)."""
    from ragraph.runtime.retrieval.embedder import check_embedder
    from ragraph.runtime.retrieval.ivf import FaissIVFEngine
    from ragraph.runtime.retrieval.store import PassageStore

    directory = Path(directory)
    manifest = Manifest.read(directory)
    if embedder_name is not None:
        check_embedder(manifest.embedder, manifest.dim, embedder_name, dim or manifest.dim)
    index = _read_faiss(directory / INDEX_FILE)
    _check_index(directory / INDEX_FILE, index, manifest)
    store = PassageStore(directory / STORE_FILE)
    if len(store) != manifest.passages:
        raise SearchIndexError(
            f"{directory / STORE_FILE}: holds {len(store)} passages, the manifest says"
            f" {manifest.passages}"
        )
    return LoadedIndex(directory, manifest, FaissIVFEngine(index), store)


def _read_faiss(path: Path):
    import faiss

    if not path.is_file():
        raise SearchIndexError(f"{path}: index file is missing")
    try:
        return faiss.read_index(str(path))
    except RuntimeError as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else "unreadable"
        raise SearchIndexError(f"{path}: not a readable faiss index ({first})") from err


def _check_index(path: Path, index, manifest: Manifest) -> None:
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
