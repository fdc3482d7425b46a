"""The search side's work. `prepare` embeds the queries of new retrievals in one batch and probes
them (on a thread of its own, so embedding overlaps the cluster scans of the running cycle);
`run_cycle` is one retrieval sub-stage: take clusters from every prepared retrieval
until the time budget is spent (plus, for the retrievals left behind, the lists the step scans
anyway), or every retrieval whole where splitting them would cost the waiting retrievals more
than it saves the first ones (`policies.split_pays`), search them in one batched call in list
order (each list read once for all its queries where they share it enough, `listmajor`), and
finish the retrievals whose probe lists are exhausted.

Inputs and outputs are immutable snapshots: the scheduler thread owns all mutable job state.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ragraph.ir.values import Passages
from ragraph.runtime.retrieval.ivf.cost import Pending, SearchCostModel, plan_step
from ragraph.runtime.retrieval.ivf.locality import History, reorder
from ragraph.runtime.retrieval.merge import merge_partials
from ragraph.runtime.retrieval.options import SearchSpec, Where
from ragraph.runtime.retrieval.protocol import ScanOrder, SearchTask, TopK
from ragraph.runtime.scheduler.completion import Chunk, cut, release_chunks
from ragraph.runtime.scheduler.policies import split_pays
from ragraph.runtime.search_service import SearchService


@dataclass(frozen=True)
class PreparedQuery:
    """An embedded and probed query: its vector, probe list and the cluster order to scan in."""

    vector: np.ndarray
    probe: np.ndarray
    order: tuple[int, ...]


@dataclass(frozen=True)
class Query:
    """A new retrieval's query, with what its cluster order depends on."""

    text: str
    nprobe: int | None
    order: str
    history: History


def prepare(service: SearchService, queries: Sequence[Query], threads: int | None = None
            ) -> list[PreparedQuery | BaseException]:
    """Embed the queries in one batch (the query embedder is batch-invariant) on `threads`
    cores, probe each alone, and put each probe list in the order its retrieval scans."""
    probed = service.embed_and_probe([q.text for q in queries], [q.nprobe for q in queries],
                                     threads)
    return [p if isinstance(p, BaseException) else _ordered(q, *p)
            for q, p in zip(queries, probed, strict=True)]


def _ordered(query: Query, vector: np.ndarray, probe: np.ndarray) -> PreparedQuery:
    ordered = reorder(probe, query.history) if query.order == "similarity" else probe
    return PreparedQuery(vector, probe, tuple(int(c) for c in ordered))


@dataclass(frozen=True)
class ScanItem:
    """A prepared retrieval to advance by one step."""

    key: int
    k: int
    stepwise: bool
    vector: np.ndarray
    probe: np.ndarray
    remaining: tuple[int, ...]
    partials: tuple[TopK, ...] = ()
    want_partial: bool = False
    waited: int = 0  # steps in a row without a cluster (starvation guard of plan_step)
    query: str = ""  # the query text (a hybrid search's keywords)
    mode: str = "dense"
    where: Where | None = None  # a filtered search: its whole probe list in one call

    @property
    def spec(self) -> SearchSpec:
        return SearchSpec(self.k, self.mode, self.where)


@dataclass(frozen=True)
class SplitCheck:
    """What deciding between a budgeted sub-stage and a whole step needs besides the step: the
    queries queued behind it for the search thread, and the measured overhead of one more step."""

    waiting: int = 0
    beta_ms: float = 0.0
    # The share of the recent speculations adopted (`SpeculationBackoff.adoption`): what a
    # partial top-k that may start a speculative generation is worth to a split.
    adoption: float = 0.0


@dataclass(frozen=True)
class ScanResult:
    key: int
    searched: tuple[int, ...] = ()
    partials: tuple[TopK, ...] = ()  # this cycle's, one per engine call that searched it
    remaining: tuple[int, ...] = ()
    final: TopK | None = None
    passages: Passages | None = None
    partial_passages: Passages | None = None
    error: BaseException | None = None


@dataclass(frozen=True)
class CycleResult:
    results: tuple[ScanResult, ...]
    predicted_ms: float
    scan_s: float
    wall_s: float
    vectors_scanned: int
    vectors_on_accelerator: int


@dataclass(frozen=True)
class Release:
    """How a cycle hands the retrievals it finishes to the scheduler loop before its end:
    `post` (thread-safe) takes each chunk's finished results; `call_ms` is one engine call's
    measured overhead, which decides how many chunks pay (`completion.release_chunks`)."""

    post: Callable[[tuple[ScanResult, ...]], None]
    call_ms: float


def run_cycle(
    service: SearchService, items: Sequence[ScanItem], budget_ms: float, cost: SearchCostModel,
    split: SplitCheck | None = None, release: Release | None = None,
) -> CycleResult:
    """One step within `budget_ms`; with `split`, a step of every retrieval whole instead
    when the budget's split does not pay (else the budget is taken as given); with `release`,
    a step that finishes every retrieval it carries hands them to the loop as they complete."""
    start = time.perf_counter()
    take = _plan([i for i in items if i.where is None], budget_ms, cost, split)
    by_k: dict[int, list[ScanItem]] = {}
    for item in items:
        if take.get(item.key):
            by_k.setdefault(item.k, []).append(item)
    scans = [_scan(service, k, group, take, cost, release) for k, group in by_k.items()]
    partials = {key: p for scan in scans for key, p in scan.partials.items()}
    released = {r.key: r for scan in scans for r in scan.released}
    results = tuple(_filtered(service, item) if item.where is not None
                    else released.get(item.key)
                    or _advance(service, item, take.get(item.key, ()), partials.get(item.key, ()))
                    for item in items)
    return CycleResult(results, sum(s.predicted_ms for s in scans),
                       sum(s.seconds for s in scans), time.perf_counter() - start,
                       sum(s.scanned for s in scans), sum(s.on_accelerator for s in scans))


@dataclass(frozen=True)
class _Scan:
    """One k's part of a cycle: each retrieval's partial top-ks (one per engine call that
    searched it), those released to the loop already, and what the calls cost."""

    partials: dict[int, tuple[TopK, ...]]
    released: tuple[ScanResult, ...]
    predicted_ms: float
    seconds: float
    scanned: int
    on_accelerator: int


def _scan(service: SearchService, k: int, group: Sequence[ScanItem],
          take: dict[int, tuple[int, ...]], cost: SearchCostModel,
          release: Release | None) -> _Scan:
    """The retrievals of one k in one list-order step, or, where they all finish in it and
    `release` says it pays, in chunks that complete them one after another
    (`completion.cut`): each list is still read once for all its queries."""
    lists = {item.key: take[item.key] for item in group}
    chunks = _chunks(group, lists, cost, release)
    by_key = {item.key: item for item in group}
    partials: dict[int, tuple[TopK, ...]] = {}
    released: list[ScanResult] = []
    predicted, seconds, scanned, on_acc = 0.0, 0.0, 0, 0
    for chunk in chunks:
        tasks = [(item, tuple(c for c in lists[item.key] if c in chunk.lists)) for item in group]
        tasks = [(item, clusters) for item, clusters in tasks if clusters]
        if tasks:
            step = service.step([SearchTask.of(item.vector, cs) for item, cs in tasks], k,
                                ScanOrder.LIST)
            predicted += cost.step_ms(np.fromiter((c for _, cs in tasks for c in cs), np.int64))
            seconds += step.stats.seconds
            scanned += step.stats.vectors_scanned
            on_acc += step.stats.vectors_on_accelerator
            for (item, _), partial in zip(tasks, step.partials, strict=True):
                partials[item.key] = partials.get(item.key, ()) + (partial,)
        if len(chunks) > 1 and release is not None:
            done = tuple(_advance(service, by_key[key], lists[key], partials.get(key, ()))
                         for key in chunk.finishes)
            release.post(done)
            released.extend(done)
    return _Scan(partials, tuple(released), predicted, seconds, scanned, on_acc)


def _chunks(group: Sequence[ScanItem], lists: dict[int, tuple[int, ...]],
            cost: SearchCostModel, release: Release | None) -> list[Chunk]:
    """The step whole, or cut where every retrieval finishes in it (a retrieval left with
    lists for a later step has nothing to release) and `release_chunks` says it pays."""
    whole = [Chunk(frozenset(c for cs in lists.values() for c in cs), tuple(lists))]
    if release is None or any(len(lists[i.key]) < len(i.remaining) for i in group):
        return whole
    step_ms = cost.step_ms(np.fromiter((c for cs in lists.values() for c in cs), np.int64))
    n = release_chunks(step_ms, release.call_ms)
    return whole if n <= 1 else cut(lists, n, cost)


def predicted_ms(steps: Iterable[Sequence[tuple[int, ...]]], cost: SearchCostModel) -> float:
    """A cycle's scan time: each k is its own engine step (lists that tasks of one step share are
    rescans, lists that two steps share are scanned twice)."""
    return sum(cost.step_ms(np.fromiter((c for cs in step for c in cs), np.int64))
               for step in steps)


def _plan(ready: Sequence[ScanItem], budget_ms: float, cost: SearchCostModel,
          split: SplitCheck | None = None) -> dict[int, tuple[int, ...]]:
    """Whole probe lists for unsplit retrievals; budgeted clusters for the stepwise ones, or
    (`split` given) their whole probe lists where the budget's split does not pay."""
    take = {i.key: i.remaining for i in ready if not i.stepwise and i.remaining}
    spent = sum(cost.clusters_ms(c) for c in take.values())
    stepwise = [i for i in ready if i.stepwise and i.remaining]
    if stepwise:
        pending = [Pending(i.key, i.remaining, i.waited) for i in stepwise]
        staged = dict(plan_step(pending, max(budget_ms - spent, 0.0), cost).take)
        if split is not None and not _split_pays(ready, take, staged, cost, split):
            staged = {i.key: i.remaining for i in stepwise}
        take.update(staged)
    return take


def _split_pays(ready: Sequence[ScanItem], unsplit: dict[int, tuple[int, ...]],
                staged: dict[int, tuple[int, ...]], cost: SearchCostModel,
                split: SplitCheck) -> bool:
    """`policies.split_pays` for this step: the staged clusters against every retrieval whole,
    each k priced as its own engine step as the cycle runs them."""
    rest = {}
    for item in ready:
        if item.stepwise and item.remaining:
            done = set(staged.get(item.key, ()))
            left = tuple(c for c in item.remaining if c not in done)
            if left:
                rest[item.key] = left
    if not rest:
        return True  # the budget already finishes every retrieval: nothing is split
    whole = {i.key: i.remaining for i in ready if i.remaining}
    finishing = len(unsplit) + len(staged) - len(rest.keys() & staged.keys())
    partial = sum(1 for i in ready if i.want_partial and i.key in staged and i.key in rest)
    k_of = {i.key: i.k for i in ready}

    def ms(take: dict[int, tuple[int, ...]]) -> float:
        by_k: dict[int, list[tuple[int, ...]]] = {}
        for key, clusters in take.items():
            by_k.setdefault(k_of[key], []).append(clusters)
        return predicted_ms(by_k.values(), cost)

    rest_ms = ms(rest)
    lost_ms = ms({**unsplit, **staged}) + rest_ms + split.beta_ms - ms(whole)
    return split_pays(finishing, len(whole) + split.waiting, rest_ms, lost_ms,
                      speculating=partial * split.adoption)


def _advance(service: SearchService, item: ScanItem, searched: tuple[int, ...],
             found: tuple[TopK, ...]) -> ScanResult:
    """The retrieval after this cycle's partial top-ks `found` over its lists `searched`."""
    partials = item.partials + found
    # A step takes a prefix of the remaining clusters, plus any later ones it scanned anyway.
    done = set(searched)
    remaining = tuple(c for c in item.remaining if c not in done)
    try:
        if not remaining:
            final = service.finish(item.vector, item.probe, partials, item.k)
            return ScanResult(item.key, searched, found, (), final,
                              service.ranked(final, item.query, item.spec))
        partial_passages = None
        # Only a step that searched this retrieval can change its partial top-k.
        if item.want_partial and found:
            merged = merge_partials(partials, item.k, service.engine.metric).topk
            partial_passages = service.ranked(merged, item.query, item.spec)
        return ScanResult(item.key, searched, found, remaining,
                          partial_passages=partial_passages)
    except Exception as err:  # attributed to this retrieval's request
        return ScanResult(item.key, error=err)


def _filtered(service: SearchService, item: ScanItem) -> ScanResult:
    """A filtered retrieval, finished in one call over its whole probe list: the selector is
    its own, so it shares no step with others (`SearchService.filtered`)."""
    try:
        final = service.filtered(item.vector, item.probe, item.spec)
        return ScanResult(item.key, item.remaining, (), (), final,
                          service.ranked(final, item.query, item.spec))
    except Exception as err:  # attributed to this retrieval's request
        return ScanResult(item.key, error=err)
