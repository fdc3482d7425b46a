"""How one search step's rows are laid out: spread evenly over the OpenMP threads, and in the
order that reads memory least.

faiss parallelizes a `search_preassigned` call over its rows (queries), one thread per block of
rows, each row scanned on one thread. A budgeted step often holds one or two long rows (the
shortest-remaining retrieval takes the whole budget), which leaves every other thread idle: a
step of one query runs on one core however many the search has. So the step's clusters, laid end
to end, are cut into one run of about equal work per thread (a task crossing a cut becomes one
row in each run), and each thread's block of rows is padded with empty rows to the same length:
faiss hands out rows in equal contiguous blocks. The pieces of a task are merged back into one
partial top-(k+1) by the exact merge, so its result holds the same elements whatever the cut
(see `merge`).

IVF-Flat scans are bound by memory bandwidth here (8-10M vectors/s on 2 cores, a tenth of the
cores' arithmetic), and a list read by one query is still in cache when the next query scans it.
`by_cluster` lays a step out one (task, cluster) pair per row, sorted by cluster, so that queries
probing the same list scan it back to back: 32 queries' whole probe lists (nprobe 128 on the 2M
bench index) scanned 1.5x faster, 64 queries' 1.8x.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Layout:
    """Rows to scan: `owner[r]` is the task row r belongs to (-1: padding), `clusters[r]` its
    clusters. Rows are grouped in `threads` equal blocks, one per thread."""

    owner: tuple[int, ...]
    clusters: tuple[np.ndarray, ...]

    @property
    def split(self) -> bool:
        """Whether any task was cut or padded (else the rows are the tasks, in order)."""
        return self.owner != tuple(range(len(self.owner)))


def balance(tasks: Sequence[np.ndarray], sizes: np.ndarray, threads: int) -> Layout:
    """Lay the tasks' clusters end to end and cut that sequence into `threads` runs of about
    equal vectors (each run a thread's block): a task crossing a cut is scanned in pieces."""
    lengths = [len(c) for c in tasks]
    flat = np.concatenate(tasks).astype(np.int64) if sum(lengths) else np.empty(0, np.int64)
    if threads < 2 or flat.size < 2:
        return Layout(tuple(range(len(tasks))), tuple(tasks))
    ends = np.cumsum(lengths)
    starts = ends - np.asarray(lengths)
    bounds = _equal_work(flat, sizes, threads)
    blocks: list[list[tuple[int, np.ndarray]]] = []
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        # The tasks whose run of `flat` overlaps [lo, hi), each clipped to it.
        first, last = np.searchsorted(ends, lo, side="right"), np.searchsorted(starts, hi)
        blocks.append([(t, flat[max(starts[t], lo):min(ends[t], hi)])
                       for t in range(first, last) if min(ends[t], hi) > max(starts[t], lo)])
    # Tasks without clusters still get a row (an empty partial), in the first block.
    present = {t for rows in blocks for t, _ in rows}
    empty = np.empty(0, dtype=np.int64)
    blocks[0] += [(t, empty) for t in range(len(tasks)) if t not in present]
    layout = _padded(blocks)
    return layout if layout.split else Layout(tuple(range(len(tasks))), tuple(tasks))


def by_cluster(tasks: Sequence[np.ndarray], sizes: np.ndarray, threads: int) -> Layout:
    """One row per (task, cluster) pair, sorted by cluster then task, cut into `threads` runs
    of about equal vectors (each a thread's block, padded to equal rows)."""
    lengths = np.fromiter((len(c) for c in tasks), np.int64, len(tasks))
    if lengths.sum() == 0:
        return Layout(tuple(range(len(tasks))), tuple(tasks))
    flat = np.concatenate(tasks).astype(np.int64)
    task_of = np.repeat(np.arange(len(tasks)), lengths)
    order = np.lexsort((task_of, flat))
    flat, task_of = flat[order], task_of[order]
    threads = max(threads, 1)
    bounds = _equal_work(flat, sizes, threads)
    empty = np.empty(0, dtype=np.int64)
    # Tasks without clusters still get a row (an empty partial), in the first block.
    blocks = [[(int(t), empty) for t in np.flatnonzero(lengths == 0)]]
    blocks += [[] for _ in range(threads - 1)]
    for b, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        blocks[b] += [(int(task_of[i]), flat[i:i + 1]) for i in range(lo, hi)]
    return _padded(blocks)


def _equal_work(flat: np.ndarray, sizes: np.ndarray, threads: int) -> np.ndarray:
    """Bounds cutting the cluster sequence `flat` into `threads` runs of about equal vectors."""
    running = np.cumsum(sizes[flat].astype(np.float64) + 1)  # +1 per list: its fixed overhead
    cuts = np.searchsorted(running, running[-1] * np.arange(1, threads) / threads, side="left")
    return np.r_[0, cuts, flat.size]


def _padded(blocks: list[list[tuple[int, np.ndarray]]]) -> Layout:
    """The blocks' rows in order, each block padded with empty rows to the longest."""
    width = max(len(rows) for rows in blocks)
    empty = np.empty(0, dtype=np.int64)
    owner: list[int] = []
    clusters: list[np.ndarray] = []
    for rows in blocks:
        rows = rows + [(-1, empty)] * (width - len(rows))
        owner += [t for t, _ in rows]
        clusters += [c for _, c in rows]
    return Layout(tuple(owner), tuple(clusters))
