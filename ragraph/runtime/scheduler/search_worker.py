"""One retrieval sub-stage cycle, run on the search thread: embed and probe newly arrived queries,
take clusters from every pending retrieval until the time budget is spent, search them in one
batched call, and finish the retrievals whose probe lists are exhausted.

Inputs and outputs are immutable snapshots: the scheduler thread owns all mutable job state.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ragraph.ir.values import Passages
from ragraph.runtime.retrieval.cost import CostModel, Pending, plan_step
from ragraph.runtime.retrieval.locality import History, reorder
from ragraph.runtime.retrieval.merge import merge_partials
from ragraph.runtime.retrieval.protocol import SearchTask, TopK
from ragraph.runtime.search_service import SearchService


@dataclass(frozen=True)
class ScanItem:
    """A retrieval to advance. `query` is set until it has been embedded and probed."""

    key: int
    k: int
    stepwise: bool
    partials: tuple[TopK, ...] = ()
    remaining: tuple[int, ...] = ()
    vector: np.ndarray | None = None
    probe: np.ndarray | None = None
    query: str | None = None
    nprobe: int | None = None
    order: str = "probe"
    history: History = field(default_factory=History)
    want_partial: bool = False


@dataclass(frozen=True)
class ScanResult:
    key: int
    vector: np.ndarray | None = None
    probe: np.ndarray | None = None
    searched: tuple[int, ...] = ()
    partial: TopK | None = None
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


def run_cycle(
    service: SearchService, items: Sequence[ScanItem], budget_ms: float, cost: CostModel
) -> CycleResult:
    start = time.perf_counter()
    results: dict[int, ScanResult] = {}
    ready: list[ScanItem] = []
    for item in items:
        try:
            ready.append(_prepared(service, item) if item.vector is None else item)
        except Exception as err:  # this request's query failed; the others go on
            results[item.key] = ScanResult(item.key, error=err)
    take = _plan(ready, budget_ms, cost)
    scanned, on_acc, scan_s = 0, 0, 0.0
    by_k: dict[int, list[ScanItem]] = {}
    for item in ready:
        if take.get(item.key):
            by_k.setdefault(item.k, []).append(item)
    partial_of: dict[int, TopK] = {}
    for k, group in by_k.items():
        tasks = [SearchTask.of(item.vector, take[item.key]) for item in group]
        step = service.step(tasks, k)
        scanned += step.stats.vectors_scanned
        on_acc += step.stats.vectors_on_accelerator
        scan_s += step.stats.seconds
        partial_of.update({item.key: p for item, p in zip(group, step.partials, strict=True)})
    for item in ready:
        results[item.key] = _advance(service, item, take.get(item.key, ()), partial_of.get(item.key))
    return CycleResult(
        tuple(results[i.key] for i in items), take_ms(take, cost), scan_s,
        time.perf_counter() - start, scanned, on_acc,
    )


def take_ms(take: dict[int, tuple[int, ...]], cost: CostModel) -> float:
    return sum(cost.clusters_ms(c) for c in take.values())


def _prepared(service: SearchService, item: ScanItem) -> ScanItem:
    vector = service.embed(item.query or "")
    probe = service.probe(vector, item.nprobe)
    order = reorder(probe, item.history) if item.order == "similarity" else probe
    return ScanItem(
        key=item.key, k=item.k, stepwise=item.stepwise, vector=vector, probe=probe,
        remaining=tuple(int(c) for c in order), want_partial=item.want_partial,
    )


def _plan(ready: Sequence[ScanItem], budget_ms: float, cost: CostModel) -> dict[int, tuple[int, ...]]:
    """Whole probe lists for unsplit retrievals; budgeted clusters for the stepwise ones."""
    take = {i.key: i.remaining for i in ready if not i.stepwise and i.remaining}
    spent = sum(cost.clusters_ms(c) for c in take.values())
    pending = [Pending(i.key, i.remaining) for i in ready if i.stepwise and i.remaining]
    if pending:
        plan = plan_step(pending, max(budget_ms - spent, 0.0), cost)
        take.update({key: clusters for key, clusters in plan.take})
    return take


def _advance(service: SearchService, item: ScanItem, searched: tuple[int, ...],
             partial: TopK | None) -> ScanResult:
    partials = item.partials + ((partial,) if partial is not None else ())
    remaining = item.remaining[len(searched):]
    try:
        if not remaining:
            final = service.finish(item.vector, item.probe, partials, item.k)
            return ScanResult(item.key, item.vector, item.probe, searched, partial, (),
                              final, service.passages(final))
        partial_passages = None
        if item.want_partial and partials:
            merged = merge_partials(partials, item.k, service.engine.metric).topk
            partial_passages = service.passages(merged)
        return ScanResult(item.key, item.vector, item.probe, searched, partial, remaining,
                          partial_passages=partial_passages)
    except Exception as err:  # attributed to this retrieval's request
        return ScanResult(item.key, error=err)
