"""A whole search step on an engine that batches on its own hands its retrievals to the loop as
they complete within it (`completion.cut`, `search_worker.Release`): each list is still read once
for all its queries, every retrieval ends with the step's own top-k, and a prompt reaches the
engine while the step that searched it still scans. Where ragraph forms the engine's batches
itself, steps stay whole."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

from ragraph.api.load import compile_catalog
from ragraph.runtime.app import execute
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.executors.base import Services
from ragraph.runtime.llm.sim.engine import SimEngine
from ragraph.runtime.request import Request
from ragraph.runtime.retrieval.ivf.cost import SearchCostModel
from ragraph.runtime.retrieval.protocol import ScanOrder
from ragraph.runtime.scheduler import completion, retrieval_side
from ragraph.runtime.scheduler.completion import completion_order, cut, release_chunks
from ragraph.runtime.scheduler.search_worker import Release, ScanItem, run_cycle
from ragraph.runtime.search_service import SearchService

from .fakes import random_search
from .test_semantics import FAST
from .test_speculation_paths import retrieve_then_answer

TAKE = {1: (0, 1, 2, 3, 4, 5), 2: (4, 5, 6), 3: (6, 7, 8, 9), 4: (0, 1, 9), 5: (10, 11, 12, 13)}


def test_retrievals_complete_one_after_another_each_list_once():
    order = completion_order(TAKE)
    # The fewest lists first (2: three, its 4 and 5 then counting for 1), then those left
    # with the fewest lists not scanned yet.
    assert order == [(2, (4, 5, 6)), (3, (7, 8, 9)), (4, (0, 1)), (1, (2, 3)),
                     (5, (10, 11, 12, 13))]
    scanned = [c for _, lists in order for c in lists]
    assert sorted(scanned) == sorted({c for lists in TAKE.values() for c in lists})
    done: set[int] = set()
    for key, new in order:  # a retrieval completes exactly when its last list is scanned
        done |= set(new)
        assert set(TAKE[key]) <= done


def test_chunks_partition_the_lists_and_finish_each_retrieval_once():
    cost = SearchCostModel((100,) * 14, 8)
    chunks = cut(TAKE, 3, cost)
    assert 1 < len(chunks) <= 3
    lists = [c for chunk in chunks for c in chunk.lists]
    assert sorted(lists) == sorted({c for cs in TAKE.values() for c in cs})  # each list once
    assert sorted(k for chunk in chunks for k in chunk.finishes) == sorted(TAKE)
    scanned: set[int] = set()
    for chunk in chunks:
        scanned |= chunk.lists
        assert all(set(TAKE[key]) <= scanned for key in chunk.finishes)
    assert len(cut(TAKE, 1, cost)) == 1


def test_chunks_pay_only_where_the_step_is_long_beside_a_call():
    assert release_chunks(1.0, 0.3) == 1  # a step of about three calls' overhead: whole
    assert release_chunks(6.0, 0.3) == 2
    assert release_chunks(160.0, 0.3) == completion.RELEASE_CHUNKS
    assert release_chunks(160.0, 0.0) == 1  # no measured overhead: whole


def _whole_items(search: SearchService, n: int, nprobe: int) -> list[ScanItem]:
    vectors = search.embedder.embed([f"question {i}" for i in range(n)])
    probes = search.engine.probe(vectors, nprobe)
    return [ScanItem(i, 5, False, v, p, tuple(int(c) for c in p))
            for i, (v, p) in enumerate(zip(vectors, probes, strict=True))]


def test_a_released_cycle_ends_in_the_whole_cycles_top_k():
    search = random_search(nprobe=24)
    items = _whole_items(search, 12, 24)
    cost = SearchCostModel(tuple(int(s) for s in search.engine.cluster_sizes()), search.engine.dim)
    whole = run_cycle(search, items, float("inf"), cost)
    posted: list[tuple] = []
    released = run_cycle(search, items, float("inf"), cost,
                         release=Release(posted.append, call_ms=1e-6))
    assert len(posted) > 1  # in chunks, each chunk's retrievals posted as it ended
    assert sorted(r.key for batch in posted for r in batch) == sorted(i.key for i in items)
    assert released.vectors_scanned == whole.vectors_scanned  # each list read once, as whole
    for a, b in zip(whole.results, released.results, strict=True):
        np.testing.assert_array_equal(a.final.ids, b.final.ids)
        np.testing.assert_array_equal(a.final.distances, b.final.distances)
        assert b.passages == a.passages
    index = search.engine.index
    index.nprobe = 24
    _, want = index.search(np.stack([i.vector for i in items]), 5)
    for n, result in enumerate(released.results):
        np.testing.assert_array_equal(result.final.ids, want[n])


class Watched(SearchService):
    """The search service, writing down each engine call of a step and the prompts submitted
    meanwhile; a call after the first waits (up to `patience` seconds) for a prompt to reach
    the engine, so whether one can is not left to the threads' timing."""

    def __init__(self, base: SearchService, log: list[str], patience: float) -> None:
        super().__init__(base.engine, base.embedder, base.store, nprobe=base.nprobe)
        self.log, self.patience, self.submitted = log, patience, threading.Event()

    def step(self, tasks, k, order=ScanOrder.BALANCED):  # noqa: ANN001, ANN201
        if "step" in self.log:
            self.submitted.wait(self.patience)
        self.log.append("step")
        return super().step(tasks, k, order)


def _run(engine_class: type[SimEngine], patience: float, monkeypatch: pytest.MonkeyPatch,
         ) -> tuple[list[list[str]], dict]:
    """The engine calls and prompts submitted, cycle by cycle, and the answers."""
    log: list[str] = []
    search = Watched(random_search(nprobe=24), log, patience)

    def cycle(*args):  # noqa: ANN002, ANN202 - run_cycle's
        log.append("cycle")
        return run_cycle(*args)

    monkeypatch.setattr(retrieval_side, "run_cycle", cycle)

    class Logged(engine_class):
        def submit(self, request):  # noqa: ANN001, ANN202 - the engine's own
            log.append("submit")
            search.submitted.set()
            return super().submit(request)

    async def go():
        config = RuntimeConfig.of(engine="sim", passes="-O0", concurrency=12)
        async with Logged(FAST) as engine:
            requests = [Request(id=f"q{i}", question=f"question {i}") for i in range(12)]
            catalog = compile_catalog(retrieve_then_answer(), config.scheduler.passes)
            return await execute(catalog, requests, config, Services(llm=engine, search=search))

    result = asyncio.run(go())
    assert not any(o.error for o in result.outcomes)
    cycles = "|".join(log).split("cycle")[1:]
    assert len(cycles) == result.stats.search_steps
    return [[e for e in c.split("|") if e] for c in cycles], \
        {o.rid: o.answer for o in result.outcomes}


def _submitted_mid_step(cycle: list[str]) -> bool:
    return "step" in cycle and "submit" in cycle[:len(cycle) - 1 - cycle[::-1].index("step")]


def test_a_prompt_reaches_the_engine_while_its_step_still_scans(monkeypatch):
    """A step's first chunk's prompts are submitted before its last chunk is scanned, and the
    answers are those of whole steps."""
    monkeypatch.setattr(completion, "CHUNK_OVER_CALL", 1e-9)  # any step is long enough
    cycles, answers = _run(SimEngine, 10.0, monkeypatch)
    assert any(_submitted_mid_step(c) for c in cycles)
    monkeypatch.setattr(completion, "CHUNK_OVER_CALL", 1e9)  # no step is: whole
    whole, whole_answers = _run(SimEngine, 0.0, monkeypatch)
    assert all(c.count("step") == 1 and not _submitted_mid_step(c) for c in whole)
    assert answers == whole_answers


class OnTheseCores(SimEngine):
    """An engine whose batches ragraph forms on this machine's cores (as llama.cpp embedded)."""

    simulated = False
    schedules_batches = True


def test_steps_stay_whole_where_ragraph_forms_the_engines_batches(monkeypatch):
    monkeypatch.setattr(completion, "CHUNK_OVER_CALL", 1e-9)
    cycles, _ = _run(OnTheseCores, 0.0, monkeypatch)
    assert all(c.count("step") == 1 for c in cycles)
