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

IVF-Flat scans are bound by memory bandwidth, not arithmetic, and a list read by one query is
still in cache when the next query scans it. `by_cluster` lays a step out one (task, cluster) pair
per row, sorted by cluster, so that queries probing the same list scan it back to back. It pays
only when the step's lists do not all stay cached anyway: on an index small enough to sit in the
last-level cache, query order is faster, the extra rows costing more than they save (figures:
docs/benchmarks/code-figures.md#list-major-scans, `benchmarks/search_bench.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True, eq=False)
class Layout:
    """Rows to scan: `owner[r]` is the task row r belongs to (-1: padding), `assign[r]` its
    clusters padded with -1 (the matrix faiss takes). Rows are grouped in equal blocks, one
    per thread."""

    owner: np.ndarray  # (rows,) int64
    assign: np.ndarray  # (rows, width) int64

    @staticmethod
    def of(tasks: Sequence[np.ndarray]) -> Layout:
        """One row per task, in order."""
        return Layout(np.arange(len(tasks), dtype=np.int64), assignment(tasks))

    @property
    def split(self) -> bool:
        """Whether any task was cut or padded (else the rows are the tasks, in order)."""
        return not np.array_equal(self.owner, np.arange(len(self.owner)))

    def clusters(self, row: int) -> np.ndarray:
        return self.assign[row][self.assign[row] >= 0]


def assignment(rows: Sequence[np.ndarray]) -> np.ndarray:
    """The rows' clusters as an (n, widest) matrix padded with -1 (vectorized)."""
    lengths = np.fromiter((len(c) for c in rows), np.int64, len(rows))
    flat = np.concatenate(rows).astype(np.int64) if lengths.sum() else np.empty(0, np.int64)
    assign = np.full((len(rows), int(lengths.max(initial=0))), -1, dtype=np.int64)
    at = np.repeat(np.arange(len(rows)), lengths)
    cols = np.arange(flat.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    assign[at, cols] = flat
    return assign


def balance(tasks: Sequence[np.ndarray], sizes: np.ndarray, threads: int) -> Layout:
    """Lay the tasks' clusters end to end and cut that sequence into `threads` runs of about
    equal vectors (each run a thread's block): a task crossing a cut is scanned in pieces."""
    lengths = [len(c) for c in tasks]
    flat = np.concatenate(tasks).astype(np.int64) if sum(lengths) else np.empty(0, np.int64)
    if threads < 2 or flat.size < 2:
        return Layout.of(tasks)
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
    return layout if layout.split else Layout.of(tasks)


def by_cluster(tasks: Sequence[np.ndarray], sizes: np.ndarray, threads: int) -> Layout:
    """One row per (task, cluster) pair, sorted by cluster then task, cut into `threads` runs
    of about equal vectors (each a thread's block, padded to equal rows)."""
    lengths = np.fromiter((len(c) for c in tasks), np.int64, len(tasks))
    if lengths.sum() == 0:
        return Layout.of(tasks)
    flat = np.concatenate(tasks).astype(np.int64)
    task_of = np.repeat(np.arange(len(tasks)), lengths)
    order = np.lexsort((task_of, flat))
    flat, task_of = flat[order], task_of[order]
    threads = max(threads, 1)
    bounds = _equal_work(flat, sizes, threads)
    # Tasks without clusters still get a row (an empty partial), first in the first block.
    empty = np.flatnonzero(lengths == 0)
    counts = np.diff(bounds)
    counts[0] += empty.size
    width = int(counts.max())
    owner = np.full(threads * width, -1, dtype=np.int64)
    assign = np.full((threads * width, 1), -1, dtype=np.int64)
    owner[:empty.size] = empty
    for b in range(threads):
        start = b * width + (empty.size if b == 0 else 0)
        lo, hi = bounds[b], bounds[b + 1]
        owner[start:start + hi - lo] = task_of[lo:hi]
        assign[start:start + hi - lo, 0] = flat[lo:hi]
    return Layout(owner, assign)


def fits_in_cache(list_bytes: np.ndarray, flat: np.ndarray, cache_bytes: int) -> bool:
    """Whether the distinct lists among `flat` (a step's clusters) fit in `cache_bytes` together."""
    return int(list_bytes[np.unique(flat)].sum()) <= cache_bytes


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
    return Layout(np.asarray(owner, dtype=np.int64), assignment(clusters))


# Where Linux describes the CPU's caches; read at each call, so a test can present another host.
CPU_CACHES = Path("/sys/devices/system/cpu/cpu0/cache")


def last_level_cache_bytes(root: Path | None = None) -> int:
    """The largest CPU cache of this machine (Linux sysfs, `CPU_CACHES`); 32 MiB where it
    cannot be read."""
    root = CPU_CACHES if root is None else root
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    sizes = []
    for entry in root.glob("index*/size") if root.is_dir() else ():
        text = entry.read_text().strip()
        try:
            sizes.append(int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text))
        except (ValueError, IndexError):
            continue
    return max(sizes, default=32 * 2**20)
