"""Spreading one search step evenly over the OpenMP threads.

faiss parallelizes a `search_preassigned` call over its rows (queries), one thread per block of
rows, each row scanned on one thread. A budgeted step often holds one or two long rows (the
shortest-remaining retrieval takes the whole budget), which leaves every other thread idle: a
step of one query runs on one core however many the search has. So the step's clusters, laid end
to end, are cut into one run of about equal work per thread (a task crossing a cut becomes one
row in each run), and each thread's block of rows is padded with empty rows to the same length:
faiss hands out rows in equal contiguous blocks. The pieces of a task are merged back into one
partial top-(k+1) by the exact merge, so its result holds the same elements whatever the cut
(see `merge`).
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
    weight = sizes[flat].astype(np.float64) + 1  # +1 per list: its fixed overhead
    if threads < 2 or flat.size < 2:
        return Layout(tuple(range(len(tasks))), tuple(tasks))
    ends = np.cumsum(lengths)
    starts = ends - np.asarray(lengths)
    running = np.cumsum(weight)
    cuts = np.searchsorted(running, running[-1] * np.arange(1, threads) / threads, side="left")
    blocks: list[list[tuple[int, np.ndarray]]] = []
    for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, flat.size], strict=True):
        # The tasks whose run of `flat` overlaps [lo, hi), each clipped to it.
        first, last = np.searchsorted(ends, lo, side="right"), np.searchsorted(starts, hi)
        blocks.append([(t, flat[max(starts[t], lo):min(ends[t], hi)])
                       for t in range(first, last) if min(ends[t], hi) > max(starts[t], lo)])
    # Tasks without clusters still get a row (an empty partial), in the first block.
    present = {t for rows in blocks for t, _ in rows}
    empty = np.empty(0, dtype=np.int64)
    blocks[0] += [(t, empty) for t in range(len(tasks)) if t not in present]
    width = max(len(rows) for rows in blocks)
    owner: list[int] = []
    clusters: list[np.ndarray] = []
    for rows in blocks:
        rows = rows + [(-1, empty)] * (width - len(rows))
        owner += [t for t, _ in rows]
        clusters += [c for _, c in rows]
    layout = Layout(tuple(owner), tuple(clusters))
    return layout if layout.split else Layout(tuple(range(len(tasks))), tuple(tasks))
