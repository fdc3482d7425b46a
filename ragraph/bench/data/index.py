"""The benchmark index: the real passages plus `--scale N` synthetic padding vectors, cached.

Ids 0..n_real-1 are the real passages; n_real.. are synthetic, stored with the `synthetic` flag
(title "(synthetic padding)", empty text), named in the manifest's `source` and in `bench.json`.
The directory is keyed by (real sources, N, nlist, seed). Built in bounded memory: the IVF
quantizer trains on a sample, vectors are generated and added in chunks, and the store is written
in a stream, so only the index itself (N x d x 4 bytes) is ever held whole.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ragraph.bench.data.realbase import RealBase
from ragraph.bench.data.synthetic import PaddingConfig, draw, fit_clusters
from ragraph.errors import ConfigError

SYNTHETIC_TITLE = "(synthetic padding)"
# k-means on 64 points per list (faiss warns under 39) and 10 iterations: the lists only need to
# follow the data's density; more iterations cost minutes on 2 cores for no change in scan cost.
TRAIN_POINTS_PER_LIST = 64
TRAIN_ITERATIONS = 10

Progress = Callable[[str, int], Callable[[int], None]]


@dataclass(frozen=True)
class IndexSpec:
    scale: int  # synthetic vectors
    nlist: int | None = None  # None: see `lists_for`
    seed: int = 0

    def __post_init__(self) -> None:
        if self.scale < 0:
            raise ConfigError("--scale", f"must be >= 0, got {self.scale}")
        if self.nlist is not None and self.nlist < 1:
            raise ConfigError("--nlist", f"must be >= 1, got {self.nlist}")

    def lists_for(self, total: int) -> int:
        """~1,000 vectors per list, as IVF4096 over 4M (HedraRAG's setting), as a power of two
        in [64, 4096]; the nprobe 32/128 settings then scan 32k/128k vectors at any scale."""
        if self.nlist is not None:
            if self.nlist > total:
                raise ConfigError("--nlist", f"{self.nlist} lists for only {total} vectors")
            return self.nlist
        return int(min(4096, max(64, 2 ** round(math.log2(max(total, 1) / 1000)))))


@dataclass(frozen=True)
class BenchIndexInfo:
    directory: str
    real: int
    synthetic: int
    nlist: int
    seed: int
    real_key: str
    sources: dict[str, int]


def index_dir(cache: Path, base: RealBase, spec: IndexSpec) -> Path:
    return index_dir_for(cache, base.key, len(base.passages), spec)


def index_dir_for(cache: Path, base_key: str, passages: int, spec: IndexSpec) -> Path:
    """The folder of the index padding a real base (its key and passage count) to `spec`."""
    nlist = spec.lists_for(passages + spec.scale)
    return cache / f"index-{base_key[:12]}-n{spec.scale}-l{nlist}-s{spec.seed}"


def ensure_bench_index(cache: Path, base: RealBase, spec: IndexSpec,
                       progress: Progress | None = None) -> BenchIndexInfo:
    """The padded index directory, built first when it is not cached (or was cached with
    another record of its embedder)."""
    directory = index_dir(cache, base, spec)
    if not is_current(directory):
        _check_room(cache, base, spec)
        _build(directory, base, spec, progress)
    raw = json.loads((directory / "bench.json").read_text())
    return BenchIndexInfo(**raw)


def is_current(directory: Path) -> bool:
    """Built, and recording the embedder this code records: an index cached before the bench's
    indexes recorded int8 queries would go on measuring float64 ones, which no new index uses."""
    from ragraph.runtime.retrieval.manifest import Manifest

    if not (directory / "bench.json").is_file():
        return False
    manifest = Manifest.read(directory)
    return manifest.embedder_spec == _embedding(manifest.dim)


# Disk a padded index takes per vector: its float32 row and id in the lists, and its row in the
# passage store (measured on the seeds index: docs/benchmarks/code-figures.md).
STORE_BYTES_PER_VECTOR = 64


def _check_room(cache: Path, base: RealBase, spec: IndexSpec) -> None:
    """Fail before a build the disk cannot hold (a full disk broke one after 8 minutes)."""
    vectors = len(base.passages) + spec.scale
    need = vectors * (base.vectors.shape[1] * 4 + 8 + STORE_BYTES_PER_VECTOR)
    cache.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(cache).free
    if free < need:
        raise ConfigError("--scale", f"an index of {vectors:,} vectors needs {need / 1e9:.1f} GB "
                          f"on disk and {cache} has {free / 1e9:.1f} GB free: remove the "
                          "indexes of other sizes there, or set RAGRAPH_CACHE to a larger disk")


def _build(directory: Path, base: RealBase, spec: IndexSpec, progress: Progress | None) -> None:
    import faiss

    from ragraph.runtime.retrieval.manifest import INDEX_FILE, Manifest, content_checksum

    n_real = len(base.passages)
    nlist = spec.lists_for(n_real + spec.scale)
    padding = PaddingConfig(spec.scale, seed=spec.seed)
    model = fit_clusters(base.vectors, padding.clusters, seed=spec.seed)
    index = faiss.IndexIVFFlat(faiss.IndexFlatIP(base.vectors.shape[1]), base.vectors.shape[1],
                               nlist, faiss.METRIC_INNER_PRODUCT)
    index.cp.seed = spec.seed
    index.cp.niter = TRAIN_ITERATIONS
    index.train(_training_sample(base, model, padding, nlist))
    tick = progress("adding vectors to the index", n_real + spec.scale) if progress else None
    _add(index, base.vectors, 0, tick)
    start = n_real
    for chunk in draw(model, padding):
        _add(index, chunk, start, tick)
        start += chunk.shape[0]
    tmp = directory.with_name(directory.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    faiss.write_index(index, str(tmp / INDEX_FILE))
    _write_store(tmp, base, spec.scale)
    source = (f"ragraph-bench real={n_real}({base.key[:12]}) synthetic={spec.scale} "
              f"seed={spec.seed} spread={padding.spread}")
    embedding = _embedding(int(index.d))
    Manifest(embedder=embedding.name, dim=embedding.dim, metric="ip", nlist=nlist,
             index_type="ivf-flat", passages=n_real + spec.scale,
             checksum=content_checksum(index), source=source, embedding=embedding).write(tmp)
    info = BenchIndexInfo(str(directory), n_real, spec.scale, nlist, spec.seed, base.key,
                          dict(base.counts))
    (tmp / "bench.json").write_text(json.dumps(asdict(info), indent=2) + "\n")
    shutil.rmtree(directory, ignore_errors=True)
    tmp.rename(directory)


def _training_sample(base: RealBase, model, padding: PaddingConfig, nlist: int) -> np.ndarray:
    """All real vectors plus synthetic ones in proportion, up to TRAIN_POINTS_PER_LIST per list."""
    want = nlist * TRAIN_POINTS_PER_LIST
    total = len(base.passages) + padding.count
    real_share = min(len(base.passages), max(1, want * len(base.passages) // max(total, 1)))
    rng = np.random.default_rng(padding.seed)
    real = base.vectors[rng.choice(len(base.passages), size=real_share, replace=False)]
    n_syn = min(padding.count, max(want - real_share, 0))
    if n_syn == 0:
        return np.ascontiguousarray(real)
    # A different seed stream from the padding itself: a sample, not a copy of its first rows.
    sample_cfg = PaddingConfig(n_syn, seed=padding.seed + 1_000_003, clusters=padding.clusters,
                               spread=padding.spread, chunk=padding.chunk)
    syn = np.concatenate(list(draw(model, sample_cfg)))
    return np.ascontiguousarray(np.concatenate([real, syn]))


def _add(index, vectors: np.ndarray, start: int, tick) -> None:
    step = 65_536
    for lo in range(0, vectors.shape[0], step):
        block = np.ascontiguousarray(vectors[lo:lo + step], dtype=np.float32)
        index.add_with_ids(block, np.arange(start + lo, start + lo + block.shape[0], dtype=np.int64))
        if tick is not None:
            tick(block.shape[0])


def _write_store(directory: Path, base: RealBase, synthetic: int) -> None:
    from ragraph.runtime.retrieval.manifest import STORE_FILE
    from ragraph.runtime.retrieval.store import StoredPassage, write_store

    def rows() -> Iterator[StoredPassage]:
        for i, p in enumerate(base.passages):
            yield StoredPassage(i, p.doc_id, p.title, p.text)
        n = len(base.passages)
        for j in range(synthetic):
            yield StoredPassage(n + j, f"synthetic#{j}", SYNTHETIC_TITLE, "", synthetic=True)

    write_store(directory / STORE_FILE, rows())


def _embedding(dim: int):
    """The record of the embedder of the real passages (realbase.py: all-MiniLM-L6-v2's vectors,
    read back from the default index or embedded by it), which run and bench then query the
    index with, as a new index records it (int8 queries), so the bench measures the query
    embedder a new index gets. The dimension is the vectors' own (the tests' toy bases are
    narrower)."""
    from dataclasses import replace

    from ragraph.runtime.retrieval.embed.spec import MINILM_NEW

    return replace(MINILM_NEW, dim=dim)
