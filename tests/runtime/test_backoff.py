"""Speculation's backoff over a run: which retrievals it holds back, which explore, and what it
counts (the rule itself: test_policies)."""

from __future__ import annotations

from types import SimpleNamespace

from ragraph.runtime.events import RunEvent, RunHooks, SpeculationHeldBack
from ragraph.runtime.outcome import RunStats
from ragraph.runtime.scheduler import speculation_rules
from ragraph.runtime.scheduler.backoff import SpeculationBackoff


class Seen:
    """An observer that keeps what the run emitted."""

    def __init__(self) -> None:
        self.events: list[RunEvent] = []

    def emit(self, event: RunEvent) -> None:
        self.events.append(event)


def retrieval(rid: str = "r1") -> SimpleNamespace:
    return SimpleNamespace(explores=None, req=SimpleNamespace(rid=rid), origin="answer")


def backoff_of(n: RunStats, seen: Seen | None = None) -> SpeculationBackoff:
    return SpeculationBackoff(n, RunHooks(seen or Seen()))


def settled(backoff: SpeculationBackoff, *outcomes: bool) -> SpeculationBackoff:
    for adopted in outcomes:
        backoff.settled(adopted)
    return backoff


def test_every_retrieval_may_speculate_before_enough_settled():
    n = RunStats()
    backoff = settled(backoff_of(n), *[False] * (speculation_rules.BACKOFF_MIN_SETTLED - 1))
    assert all(backoff.allows(retrieval()) for _ in range(10))
    assert n.speculations_held_back == 0


def test_low_accuracy_holds_back_all_but_one_retrieval_in_n():
    n, seen = RunStats(), Seen()
    backoff = settled(backoff_of(n, seen), *[False] * speculation_rules.BACKOFF_WINDOW)
    jobs = [retrieval(f"r{i}") for i in range(2 * speculation_rules.EXPLORE_EVERY)]
    allowed = [backoff.allows(j) for j in jobs]
    assert allowed == [speculation_rules.explores(i) for i in range(len(jobs))]
    assert n.speculations_held_back == len(jobs) - 2
    # Each one held back is reported (for /metrics), the explorers are not.
    assert seen.events == [SpeculationHeldBack(f"r{i}", "answer")
                           for i, ok in enumerate(allowed) if not ok]
    # A retrieval is judged once: asked again, the same answer and no second count.
    assert [backoff.allows(j) for j in jobs] == allowed
    assert n.speculations_held_back == len(jobs) - 2


def test_speculation_comes_back_when_the_recent_ones_are_adopted():
    n = RunStats()
    backoff = settled(backoff_of(n), *[False] * speculation_rules.BACKOFF_WINDOW)
    held = [retrieval() for _ in range(speculation_rules.EXPLORE_EVERY)]
    assert not all(backoff.allows(j) for j in held)
    settled(backoff, *[True] * (speculation_rules.BACKOFF_WINDOW // 2))
    assert all(backoff.allows(j) for j in held)  # those held back before may speculate again
    assert backoff.adoption > speculation_rules.adoption_rate(0, speculation_rules.BACKOFF_WINDOW)


def test_the_run_summary_says_what_was_held_back_only_when_any_was():
    assert "held back" not in RunStats(speculations=2, rollbacks=2).describe_speculation()
    line = RunStats(speculations=2, rollbacks=2, speculations_held_back=5).describe_speculation()
    assert line == "started 2, adopted 0, rolled back 2, held back 5"
