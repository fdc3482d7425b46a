"""A search step carrying a few retrievals, none asking for a partial top-k, searches them
whole under the adaptive budget: cut into sub-stages, each retrieval pays the step overhead
again and waits between its steps, and there is no lockstep to break
(`policies.step_budget_ms`). A partial top-k, which speculation starts a generation on, still
gets sub-stages."""

from __future__ import annotations

import math

import pytest

from ragraph.runtime.scheduler import policies as p
from ragraph.runtime.scheduler import retrieval_side
from ragraph.runtime.scheduler.search_worker import run_cycle

from .fakes import random_search
from .test_speculation_paths import retrieve_then_answer, run

# -O2 without speculate: the retrievals are stepwise, none asks for a partial top-k.
SPLIT_NO_SPECULATION = "split-stages,reorder,rewire,prefetch"


def test_a_few_retrievals_without_a_partial_are_searched_whole():
    staged = p.loaded_budget_ms(p.retrieval_budget_ms(1.0, 40.0), 1.0, 100.0)
    few = p.FEW_RETRIEVALS
    assert p.step_budget_ms(1.0, 40.0, 100.0, True, few, partial_wanted=False) == math.inf
    assert p.step_budget_ms(1.0, 40.0, 100.0, True, few + 1, partial_wanted=False) == staged
    assert p.step_budget_ms(1.0, 40.0, 100.0, True, 1, partial_wanted=True) == staged
    assert p.step_budget_ms(1.0, 40.0, 100.0, True) == staged  # the step not known: as before


def test_requests_one_at_a_time_search_each_retrieval_in_one_step(
        monkeypatch: pytest.MonkeyPatch) -> None:
    budgets: list[float] = []

    def cycle(search, items, budget_ms, *rest):  # noqa: ANN001, ANN002, ANN202 - run_cycle's
        budgets.append(budget_ms)
        return run_cycle(search, items, budget_ms, *rest)

    monkeypatch.setattr(retrieval_side, "run_cycle", cycle)
    result, _ = run(retrieve_then_answer(), random_search(nprobe=24), SPLIT_NO_SPECULATION,
                    budget_ms=None, requests=3, concurrency=1)
    assert not any(o.error for o in result.outcomes)
    # After the first retrieval t_R is timed; a lone retrieval still goes whole.
    assert budgets == [math.inf] * 3
    assert result.stats.search_steps == 3
