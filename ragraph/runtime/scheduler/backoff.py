"""Speculation's backoff: while the recent speculations were mostly rolled back, retrievals stop
asking the search thread for partial top-ks (which cuts their searches into more steps) and start
no speculative generation, except one in `speculation_rules.EXPLORE_EVERY`, which keeps accuracy
measured so that speculation comes back when it is accurate again."""

from __future__ import annotations

from ragraph.runtime.events import RunHooks
from ragraph.runtime.outcome import RunStats
from ragraph.runtime.scheduler import speculation_rules
from ragraph.runtime.scheduler.jobs import RetJob


class SpeculationBackoff:
    """The run's recent settlements, and which retrievals may speculate on them; counts the
    retrievals held back into `counters` and reports each to `hooks` (`/metrics` counts them)."""

    def __init__(self, counters: RunStats, hooks: RunHooks) -> None:
        self.n, self.hooks = counters, hooks
        self.recent = speculation_rules.Settlements()
        self._opportunities = 0  # retrievals held back or exploring so far

    def settled(self, adopted: bool) -> None:
        self.recent.add(adopted)

    @property
    def adoption(self) -> float:
        """The recent share adopted, from the prior (`speculation_rules.adoption_rate`): what a partial
        top-k is worth to a split search step."""
        return speculation_rules.adoption_rate(self.recent.adopted, self.recent.settled)

    def allows(self, job: RetJob) -> bool:
        """Whether `job` may ask for partial top-ks and start a speculation on one. A retrieval
        first met while backing off is held back or explores for the rest of its search."""
        if not speculation_rules.backs_off(self.recent.adopted, self.recent.settled):
            return True
        if job.explores is None:
            job.explores = speculation_rules.explores(self._opportunities)
            self._opportunities += 1
            if not job.explores:
                self.n.speculations_held_back += 1
                self.hooks.held_back(job.req.rid, job.origin)
        return job.explores
