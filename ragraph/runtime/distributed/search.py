"""The search side of a run on Ray: the index's lists on shard actors, the rest here.

A batch (`run --ray`) starts the shards and searches them from its one process. A server on Ray
Serve (`serve --ray`) starts them once, in the command's process, and hands a `ShardedIndex` to
each Serve replica, which attaches to the same actors with its own embedder and passage store.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ragraph.runtime.distributed.options import ScaleConfig
from ragraph.runtime.distributed.ray_env import connect
from ragraph.runtime.distributed.shard_pool import (
    RunningShards,
    start_shards,
    stop_shards,
)
from ragraph.runtime.distributed.sharded import ShardedEngine
from ragraph.runtime.retrieval.embed.embedder import check_embedder
from ragraph.runtime.retrieval.ivf.shard_lists import open_plan
from ragraph.runtime.retrieval.manifest import Manifest
from ragraph.runtime.retrieval.store import PassageStore
from ragraph.runtime.search_service import SearchService


@dataclass(frozen=True)
class ShardedIndex:
    """An index directory (a path every node reads) whose lists are on running shard actors.
    It pickles (a path and Ray's actor handles), so another process can search it too."""

    directory: Path
    shards: RunningShards

    @staticmethod
    def start(address: str, directory: Path, options: ScaleConfig, embedder: str,
              dim: int) -> ShardedIndex:
        """Join the cluster and start the shards on `directory`, once it is known to have been
        built with the queries' `embedder` (its name and dimension)."""
        _check_manifest(Path(directory), embedder, dim)
        connect(address)
        plan, source, sizes = open_plan(Path(directory), options.shards, options.replicate)
        return ShardedIndex(Path(directory), start_shards(plan, source, sizes, options))

    def search(self, embedder, nprobe: int, owner: bool = False) -> SearchService:
        """This process's search over the shards, with the passages and the query embedder here;
        `owner`: closing its engine stops the shards (else they stay up for the others)."""
        _check_manifest(self.directory, embedder.name, embedder.dim)
        return SearchService(ShardedEngine.attach(self.shards, owner), embedder,
                             PassageStore(Manifest.read(self.directory).store_path(
                                 self.directory)), nprobe=nprobe)

    def stop(self) -> None:
        stop_shards(self.shards)


def open_sharded_search(address: str, directory: Path, embedder, options: ScaleConfig,
                        nprobe: int) -> SearchService:
    """Join the cluster, start the shards on `directory`, and search them from here (closing
    the engine stops them)."""
    index = ShardedIndex.start(address, directory, options, embedder.name, embedder.dim)
    return index.search(embedder, nprobe, owner=True)


def _check_manifest(directory: Path, embedder: str, dim: int) -> None:
    manifest = Manifest.read(directory)
    check_embedder(manifest.embedder, manifest.dim, embedder, dim)
