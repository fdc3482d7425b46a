"""Shard files: IVF indexes holding some of an index's inverted lists, on a path every node reads.

A shard is the original index (same quantizer, same nlist, same codes) with only its own lists
filled, so faiss scans them exactly as it scans the whole index. `ragraph index shard DIR
--shards N` writes `DIR/shards-N/` (the plan and one `shard-i.faiss` per shard); without it, each
shard cuts its lists out of `DIR/index.faiss` at start-up, read memory-mapped so a shard pages in
only its own lists. Either way the scheduler side reads only the quantizer and the list sizes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ragraph.errors import SearchIndexError
from ragraph.runtime.retrieval.ivf.shard_plan import ShardPlan, plan_shards
from ragraph.runtime.retrieval.manifest import INDEX_FILE, MANIFEST, Manifest

PLAN_FILE = "plan.json"


@dataclass(frozen=True)
class ShardSource:
    """Where shards load from: the whole index file and, when prebuilt, the shard files."""

    index_file: str
    shard_dir: str | None = None

    def shard_file(self, shard: int) -> Path | None:
        return None if self.shard_dir is None else Path(self.shard_dir) / f"shard-{shard}.faiss"


def read_mapped(path: Path):
    """An IVF index with its lists memory-mapped: the quantizer and sizes without the data."""
    import faiss

    from ragraph.runtime.retrieval.ivf.engine import ivf_of

    if not Path(path).is_file():
        raise SearchIndexError(f"{path}: index file is missing")
    try:
        return ivf_of(faiss.read_index(str(path), faiss.IO_FLAG_MMAP))
    except RuntimeError as err:
        raise SearchIndexError(f"{path}: not a readable faiss index ({err})") from err


def list_sizes(ivf) -> np.ndarray:
    return np.array([ivf.invlists.list_size(c) for c in range(ivf.nlist)], np.int64)


def keep_lists(ivf, clusters: np.ndarray):
    """`ivf` with every list but `clusters` emptied, the kept ones copied into memory."""
    import faiss

    lists = faiss.ArrayInvertedLists(ivf.nlist, ivf.code_size)
    total = 0
    for c in np.asarray(clusters, dtype=np.int64).tolist():
        n = ivf.invlists.list_size(c)
        if n:
            lists.add_entries(c, n, ivf.invlists.get_ids(c), ivf.invlists.get_codes(c))
            total += n
    ivf.replace_invlists(lists, True)
    lists.this.disown()  # the index owns it now
    ivf.ntotal = total
    return ivf


def load_shard(source: ShardSource, shard: int, clusters: np.ndarray, sizes: np.ndarray):
    """One shard's index, from its prebuilt file or cut from the whole index; checked against
    the plan's clusters and the whole index's list sizes."""
    import faiss

    path = source.shard_file(shard)
    if path is None:
        ivf = keep_lists(read_mapped(Path(source.index_file)), clusters)
    elif path.is_file():
        ivf = faiss.read_index(str(path))
    else:
        raise SearchIndexError(f"{path}: shard file is missing (ragraph index shard writes it)")
    want = np.zeros_like(sizes)
    want[clusters] = sizes[clusters]
    if not np.array_equal(list_sizes(ivf), want):
        raise SearchIndexError(f"{path or source.index_file}: shard {shard}'s lists do not"
                               " match the plan (stale shard files? run ragraph index shard)")
    return ivf


def shard_dir(index_dir: Path, shards: int) -> Path:
    return Path(index_dir) / f"shards-{shards}"


def checksum_of(index_dir: Path) -> str:
    """The manifest's content checksum ('' for a bare faiss file without a manifest)."""
    return Manifest.read(index_dir).checksum if (index_dir / MANIFEST).is_file() else ""


def current_index_file(index_dir: Path) -> Path:
    """The faiss file of the index's current version (`index.faiss` for a bare directory)."""
    if (index_dir / MANIFEST).is_file():
        return Manifest.read(index_dir).index_path(index_dir)
    return index_dir / INDEX_FILE


def write_shards(index_dir: Path, shards: int, replicate: float, progress=None) -> ShardPlan:
    """`ragraph index shard`: the plan and every shard's file under `index_dir/shards-N/`."""
    import faiss

    index_dir = Path(index_dir)
    index_file = current_index_file(index_dir)
    sizes = list_sizes(read_mapped(index_file))
    plan = plan_shards(sizes, shards, replicate)
    out = shard_dir(index_dir, shards)
    out.mkdir(parents=True, exist_ok=True)
    for s in range(shards):
        ivf = keep_lists(read_mapped(index_file), plan.clusters_of(s))
        faiss.write_index(ivf, str(out / f"shard-{s}.faiss"))
        if progress is not None:
            progress(s)
    # The plan last: a directory with a plan is a complete one.
    plan.write(out / PLAN_FILE, checksum_of(index_dir))
    return plan


def open_plan(index_dir: Path, shards: int, replicate: float) -> tuple[ShardPlan, ShardSource,
                                                                         np.ndarray]:
    """The plan, where shards load from, and the list sizes: the prebuilt shards of
    `index_dir/shards-N/` when they match the index, else a plan made now."""
    index_dir = Path(index_dir)
    index_file = current_index_file(index_dir)
    sizes = list_sizes(read_mapped(index_file))
    prebuilt = shard_dir(index_dir, shards) / PLAN_FILE
    if prebuilt.is_file():
        raw = json.loads(prebuilt.read_text(encoding="utf-8"))
        plan = ShardPlan.from_json(raw, str(prebuilt))
        if raw.get("source_checksum") != checksum_of(index_dir) or plan.nlist != sizes.size:
            raise SearchIndexError(f"{prebuilt}: built from another version of {index_file};"
                                   f" rerun ragraph index shard {index_dir} --shards {shards}")
        return plan, ShardSource(str(index_file), str(prebuilt.parent)), sizes
    return plan_shards(sizes, shards, replicate), ShardSource(str(index_file)), sizes
