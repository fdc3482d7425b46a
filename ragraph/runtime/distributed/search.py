"""The search side of a run on Ray: the index's lists on shard actors, the rest here."""

from __future__ import annotations

from pathlib import Path

from ragraph.runtime.distributed.ray_env import connect
from ragraph.runtime.distributed.shard_pool import ShardOptions
from ragraph.runtime.distributed.sharded import ShardedEngine
from ragraph.runtime.retrieval.embedder import check_embedder
from ragraph.runtime.retrieval.manifest import STORE_FILE, Manifest
from ragraph.runtime.retrieval.store import PassageStore
from ragraph.runtime.search_service import SearchService


def open_sharded_search(address: str, directory: Path, embedder, options: ShardOptions,
                        nprobe: int) -> SearchService:
    """Join the cluster, start the shards on `directory` (a path every node reads), and keep
    the passages and the query embedder on this side."""
    connect(address)
    manifest = Manifest.read(Path(directory))
    check_embedder(manifest.embedder, manifest.dim, embedder.name, embedder.dim)
    engine = ShardedEngine.open(Path(directory), options)
    return SearchService(engine, embedder, PassageStore(Path(directory) / STORE_FILE),
                         nprobe=nprobe)
