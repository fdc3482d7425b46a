"""Which shard holds which inverted lists, and which holder scans a cluster in a given step.

faiss's `IndexIVFShards` splits by id, so every shard probes every list a query names: the hot
lists of a skewed IVF are scanned on every shard (VectorLiteRAG's point). Here a shard holds whole
lists, balanced by size (the scan cost of a list), so a (query, clusters) task goes only to the
shards that hold its clusters. The hottest lists may be held by two shards: a step then gives
each such list to the less loaded holder, and a holder that died is covered by the other one.

Both decisions are pure functions of the sizes and the plan, so they are tested without Ray.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from ragraph.errors import ConfigError, SearchIndexError


@dataclass(frozen=True)
class ShardPlan:
    """`holders[c]`: the shards holding cluster c, primary first (one or two)."""

    shards: int
    holders: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        if self.shards < 1:
            raise ConfigError("shards", f"must be a positive integer, got {self.shards}")
        for c, held in enumerate(self.holders):
            if not 1 <= len(held) <= 2 or len(set(held)) != len(held) or not all(0 <= s < self.shards
                                                                   for s in held):
                raise ConfigError("holders", f"cluster {c} has invalid holders {held}")

    @property
    def nlist(self) -> int:
        return len(self.holders)

    def clusters_of(self, shard: int) -> np.ndarray:
        """The clusters one shard holds, ascending."""
        return np.array([c for c, held in enumerate(self.holders) if shard in held], np.int64)

    @cached_property
    def primary(self) -> np.ndarray:
        return np.array([h[0] for h in self.holders], dtype=np.int64)

    @cached_property
    def secondary(self) -> np.ndarray:
        """The second holder of each list, -1 where there is none."""
        return np.array([h[1] if len(h) > 1 else -1 for h in self.holders], dtype=np.int64)

    def replicated(self) -> np.ndarray:
        return np.array([c for c, held in enumerate(self.holders) if len(held) > 1], np.int64)

    def to_json(self) -> dict:
        return {"shards": self.shards, "holders": [list(h) for h in self.holders]}

    @staticmethod
    def from_json(raw: object, where: str) -> ShardPlan:
        if not isinstance(raw, dict) or not isinstance(raw.get("holders"), list):
            raise SearchIndexError(f"{where}: not a shard plan (no 'holders' list)")
        try:
            return ShardPlan(int(raw["shards"]), tuple(tuple(int(s) for s in h)
                                                       for h in raw["holders"]))
        except (KeyError, TypeError, ValueError) as err:
            raise SearchIndexError(f"{where}: malformed shard plan ({err})") from err

    def write(self, path: Path, source_checksum: str) -> None:
        body = {**self.to_json(), "source_checksum": source_checksum}
        path.write_text(json.dumps(body) + "\n", encoding="utf-8")


def plan_shards(sizes: np.ndarray, shards: int, replicate: float = 0.0) -> ShardPlan:
    """Lists to shards, largest first onto the least-loaded shard (LPT: within 4/3 of the best
    balance). The `replicate` fraction of lists, the largest ones, goes to two shards, each
    counted with half its size (a step splits their scans between both holders)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    if isinstance(shards, bool) or not isinstance(shards, int) or shards < 1:
        raise ConfigError("shards", f"must be a positive integer, got {shards!r}")
    if not 0.0 <= replicate <= 1.0:
        raise ConfigError("replicate", f"must be in [0, 1], got {replicate}")
    order = np.lexsort((np.arange(sizes.size), -sizes))  # largest first, ties by cluster id
    n_hot = int(round(replicate * sizes.size)) if shards > 1 else 0
    load = np.zeros(shards, dtype=np.float64)
    holders: list[tuple[int, ...]] = [()] * sizes.size
    for rank, c in enumerate(order.tolist()):
        copies = 2 if rank < n_hot else 1
        chosen = np.lexsort((np.arange(shards), load))[:copies]
        load[chosen] += sizes[c] / copies
        holders[c] = tuple(int(s) for s in chosen)
    return ShardPlan(shards, tuple(holders))


def route_step(tasks: Sequence[np.ndarray], plan: ShardPlan, sizes: np.ndarray,
               alive: Collection[int]) -> dict[int, list[np.ndarray]]:
    """For each shard, each task's clusters it scans in this step (shards with nothing to scan
    left out). A list held twice goes to the holder with less work so far in the step (lists
    with one choice are counted first); only `alive` holders are chosen while one of them holds
    the list. A list whose holders are all down goes to its primary, whose restart the step
    then waits for."""
    lengths = np.fromiter((len(c) for c in tasks), np.int64, len(tasks))
    flat = np.concatenate(tasks).astype(np.int64) if lengths.sum() else np.empty(0, np.int64)
    owner = np.repeat(np.arange(len(tasks)), lengths)
    up = np.zeros(plan.shards + 1, dtype=bool)  # index -1 (no second holder) stays down
    up[list(alive)] = True
    first, second = plan.primary[flat], plan.secondary[flat]
    both = up[first] & up[second]
    shard_of = np.where(~up[first] & up[second], second, first)
    load = np.zeros(plan.shards, dtype=np.int64)
    np.add.at(load, shard_of[~both], sizes[flat[~both]])
    for i in np.flatnonzero(both).tolist():
        a, b = int(first[i]), int(second[i])
        shard_of[i] = a if (load[a], a) <= (load[b], b) else b
        load[shard_of[i]] += sizes[flat[i]]
    out: dict[int, list[np.ndarray]] = {}
    for shard in np.unique(shard_of).tolist():
        mine = shard_of == shard
        cut = np.cumsum(np.bincount(owner[mine], minlength=len(tasks)))[:-1]
        out[shard] = np.split(flat[mine], cut)
    return out
