"""Which replica serves a prompt: the one that has seen most of its prefix, else the least loaded.

A prompt laid out [system][documents][question] (RAGCache) shares its leading blocks with every
request that retrieved the same documents; sending them to one replica lets that replica's prefix
cache (SGLang's RadixAttention, llama.cpp's slot cache) reuse their KV instead of recomputing it
on every replica. The router remembers, per replica, hashes of the prompt prefixes it sent there
(cumulative, one per block of characters, least recently used dropped first): a prompt goes to
the replica matching the most leading blocks when that covers at least `min_match` of it (as
sglang_router's cache-aware policy does with its cache threshold), else to the replica with the
fewest requests in flight. Pure functions and a small table, so routing is tested without servers.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from ragraph.errors import ConfigError


@dataclass(frozen=True)
class RouterConfig:
    # Characters per prefix block (~16 tokens): fine enough to see a shared system prompt.
    block_chars: int = 64
    # sglang_router's default cache threshold: route by prefix when half the prompt matches.
    min_match: float = 0.5
    # Prefix blocks remembered per replica (~16 KiB of hashes each).
    table_blocks: int = 1024
    # A replica marked down is health-checked again after this long, then after twice as long
    # each time it is still down, up to `probe_max_s` (a restarted server is back in a minute).
    probe_after_s: float = 1.0
    probe_max_s: float = 60.0

    def __post_init__(self) -> None:
        if self.block_chars < 1 or self.table_blocks < 1:
            raise ConfigError("block_chars", "block_chars and table_blocks must be positive")
        if not 0 < self.min_match <= 1:
            raise ConfigError("min_match", f"must be in (0, 1], got {self.min_match}")
        if not 0 < self.probe_after_s <= self.probe_max_s:
            raise ConfigError("probe_after_s", f"needs 0 < probe_after_s <= probe_max_s, got "
                              f"{self.probe_after_s}, {self.probe_max_s}")


def next_probe_s(waited_s: float, config: RouterConfig) -> float:
    """How long to wait before the next health check of a replica still down (backoff)."""
    return min(waited_s * 2, config.probe_max_s)


def prefix_hashes(prompt: str, block_chars: int) -> list[bytes]:
    """One hash per whole block: hash i covers the prompt's first (i + 1) blocks."""
    h = hashlib.blake2b(digest_size=16)
    out = []
    for end in range(block_chars, len(prompt) + 1, block_chars):
        h.update(prompt[end - block_chars:end].encode("utf-8", "surrogatepass"))
        out.append(h.copy().digest())
    return out


class PrefixTable:
    """The prefixes sent to one replica, least recently used dropped first."""

    def __init__(self, capacity: int) -> None:
        self._seen: OrderedDict[bytes, None] = OrderedDict()
        self._capacity = capacity

    def matched(self, hashes: Sequence[bytes]) -> int:
        """How many leading blocks this replica has seen."""
        n = 0
        for h in hashes:
            if h not in self._seen:
                break
            n += 1
        return n

    def add(self, hashes: Sequence[bytes]) -> None:
        for h in hashes:
            self._seen[h] = None
            self._seen.move_to_end(h)
        while len(self._seen) > self._capacity:
            self._seen.popitem(last=False)


def choose(hashes: Sequence[bytes], tables: Sequence[PrefixTable], load: Sequence[int],
           usable: Collection[int], min_match: float) -> int | None:
    """The replica for a prompt (None when no replica is usable)."""
    if not usable:
        return None
    order = sorted(usable)
    if hashes:
        best = max(order, key=lambda r: (tables[r].matched(hashes), -load[r]))
        if tables[best].matched(hashes) >= min_match * len(hashes):
            return best
    return min(order, key=lambda r: (load[r], r))
