"""A shard that crashes once, in the middle of a search call: its process exits while the
scheduler waits on it, as a node losing power would. A marker file makes it exactly once:
the restarted actor (a new process, counting from zero) finds the marker and lives."""

from __future__ import annotations

import os
from pathlib import Path

from ragraph.runtime.distributed.shard_server import ShardServer


def crashing_shard(marker: Path, shard: int, at_call: int) -> type:
    class CrashingShard(ShardServer):
        def __init__(self, source, index, clusters, sizes, threads) -> None:
            super().__init__(source, index, clusters, sizes, threads)
            self._index, self._calls = index, 0

        def search(self, queries, clusters, k, order):
            self._calls += 1
            if self._index == shard and self._calls == at_call:
                try:
                    os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
                except FileExistsError:
                    pass  # crashed once already
                else:
                    os._exit(1)
            return super().search(queries, clusters, k, order)

    return CrashingShard
