"""The order in which a whole step's retrievals complete, so that the step can hand each one to
the loop as soon as its own lists are scanned instead of all of them at the step's end.

A list-major step reads each list once for every retrieval that probes it; which list it reads
first changes nothing in what it scans, only when each retrieval has all of its lists. Taking
first the retrieval with the fewest lists not scanned yet (and with each list, every retrieval
of the step that probes it) makes retrievals complete one after another through the step. The
order is cut into chunks of about equal scan time, each one engine call; a retrieval whose last
list lies in a chunk is finished when that chunk is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ragraph.runtime.retrieval.ivf.cost import SearchCostModel


@dataclass(frozen=True)
class Chunk:
    """A part of a step: the lists it scans, and the retrievals (by key) it finishes."""

    lists: frozenset[int]
    finishes: tuple[int, ...]


def completion_order(take: Mapping[int, Sequence[int]]) -> list[tuple[int, tuple[int, ...]]]:
    """Each retrieval of `take` (key -> its lists this step) with the lists that complete it,
    in the order they complete: greedily the one with the fewest lists left (ties: the lower
    key, the older retrieval). Every list appears once over the whole order."""
    left = {key: set(lists) for key, lists in take.items()}
    probing: dict[int, list[int]] = {}
    for key, lists in take.items():
        for c in lists:
            probing.setdefault(c, []).append(key)
    order = []
    while left:
        key = min(left, key=lambda k: (len(left[k]), k))
        new = tuple(sorted(left.pop(key)))
        for c in new:  # each (retrieval, list) pair is touched once over the whole order
            for other in probing[c]:
                if other in left:
                    left[other].discard(c)
        order.append((key, new))
    return order


def cut(take: Mapping[int, Sequence[int]], chunks: int, cost: SearchCostModel) -> list[Chunk]:
    """The completion order of `take` in at most `chunks` chunks of about equal scan time, each
    cut where a retrieval completes (a retrieval's lists never wait for the next chunk)."""
    order = completion_order(take)
    if chunks <= 1 or len(order) <= 1:
        return [Chunk(frozenset(c for _, lists in order for c in lists),
                      tuple(key for key, _ in order))]
    total = sum(cost.clusters_ms(lists) for _, lists in order)
    out: list[Chunk] = []
    lists: set[int] = set()
    keys: list[int] = []
    spent = 0.0
    for key, new in order:
        lists.update(new)
        keys.append(key)
        spent += cost.clusters_ms(new)
        if spent >= total * (len(out) + 1) / chunks and len(out) < chunks - 1:
            out.append(Chunk(frozenset(lists), tuple(keys)))
            lists, keys = set(), []
    if keys:
        out.append(Chunk(frozenset(lists), tuple(keys)))
    return out


# A whole step is cut into at most this many engine calls: on the seeds index (1M vectors,
# IVF1024, 30 retrievals at nprobe 128, each list read once either way) 2 and 4 chunks scanned
# in the whole step's time, 8 about 5% slower, and 8 released no faster than 4 on the bench
# (docs/benchmarks/seeds.md#issue-51-releasing-a-steps-retrievals-as-they-complete).
RELEASE_CHUNKS = 4
# ... and each chunk is predicted at least this many times a call's overhead outside the scan.
CHUNK_OVER_CALL = 10.0


def release_chunks(step_ms: float, call_ms: float) -> int:
    """The engine calls a whole step of `step_ms` (predicted) is cut into so that its
    retrievals reach the loop as they complete: as many as keep each chunk `CHUNK_OVER_CALL`
    times the per-call overhead `call_ms` (the measured beta), up to `RELEASE_CHUNKS`; 1 (the
    step whole) where the step is too short for two, or the overhead is not known."""
    if not call_ms > 0:
        return 1
    return max(1, min(RELEASE_CHUNKS, int(step_ms // (CHUNK_OVER_CALL * call_ms))))
