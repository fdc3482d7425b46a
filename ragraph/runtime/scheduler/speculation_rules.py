"""When speculation runs: which partial top-k may start a speculative generation, how much the
adopted share so far is worth, and when speculation backs off because it keeps guessing wrong
(pure rules; `backoff.SpeculationBackoff` and `lookahead.Lookahead` apply them)."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

# The share of speculations adopted assumed before any has settled: after reorder the first
# clusters hold most of the final top-k (RAGCache: 95% of requests had theirs after 13% of the
# search), so a partial top-k is as likely as not to be the final one.
PRIOR_ADOPTION = 0.5


def adoption_rate(adopted: int, settled: int, prior: float = PRIOR_ADOPTION,
                  weight: int = 4) -> float:
    """The share of speculations adopted so far, starting from `prior` worth `weight`
    settlements (so one early rollback does not stop speculation for the run)."""
    if adopted < 0 or settled < adopted:
        raise ValueError("adopted must be within 0..settled")
    return (adopted + prior * weight) / (settled + weight)


# Speculation's backoff. Under BACKOFF_ACCURACY more speculations are rolled back than adopted;
# on the seeds index at nprobe 512, where accuracy fell to 25-50%, the search thread ran more
# steps for partial results (79-98 against 69-88 without speculation at 10 req/s, 40-50 against
# 28-31 at 16: docs/benchmarks/ablation.md#online-latency-against-the-arrival-rate).
BACKOFF_ACCURACY = 0.5
# Accuracy is judged over the last BACKOFF_WINDOW settlements, not the run's, so that speculation
# comes back when load falls: those runs settled 5-13 speculations in a 12 s window, so a load
# that passed is forgotten within about one. Under BACKOFF_MIN_SETTLED in the window nothing is
# held back (the prior's weight in `adoption_rate`: one early rollback does not stop speculation).
BACKOFF_WINDOW = 8
BACKOFF_MIN_SETTLED = 4
# While held back, one retrieval in EXPLORE_EVERY speculates anyway, so accuracy is still measured
# (the window turns over at a quarter of its rate) while three in four stop costing steps. Every
# EXPLORE_EVERY-th, not a random one: runs stay reproducible.
EXPLORE_EVERY = 4


@dataclass
class Settlements:
    """The outcomes (adopted or not) of the last `window` speculations to settle."""

    window: int = BACKOFF_WINDOW
    _recent: deque[bool] = field(default_factory=deque)

    def add(self, adopted: bool) -> None:
        self._recent.append(adopted)
        if len(self._recent) > self.window:
            self._recent.popleft()

    @property
    def adopted(self) -> int:
        return sum(self._recent)

    @property
    def settled(self) -> int:
        return len(self._recent)


def backs_off(adopted: int, settled: int) -> bool:
    """Whether speculation is held back: of the recent `settled` speculations (at least
    `BACKOFF_MIN_SETTLED`), under `BACKOFF_ACCURACY` were adopted."""
    if adopted < 0 or settled < adopted:
        raise ValueError("adopted must be within 0..settled")
    return settled >= BACKOFF_MIN_SETTLED and adopted < BACKOFF_ACCURACY * settled


def explores(opportunity: int) -> bool:
    """Whether the retrieval that is the `opportunity`-th (from 0) to be held back speculates
    anyway: one in `EXPLORE_EVERY`, the first at once."""
    if opportunity < 0:
        raise ValueError("opportunity must be non-negative")
    return opportunity % EXPLORE_EVERY == 0


# The share of its probe list a retrieval has searched before its partial top-k may start a
# speculative generation: under load a step shared by many retrievals gives each a few of its
# clusters, and a first partial top-k from 5% of them was the final one 40-60% of the time on IRG
# (docs/benchmarks/ablation.md#online-latency-against-the-arrival-rate).
SPECULATE_AFTER_SHARE = 0.25


def counts_for_speculation(searched: int, probed: int) -> bool:
    """Whether a partial top-k over `searched` of `probed` clusters may be speculated on."""
    return probed > 0 and searched >= SPECULATE_AFTER_SHARE * probed


def speculate_on(views: int, drift: float, max_drift: float) -> bool:
    """Whether a partial top-k may start a speculative generation; `views`: the partial
    results the retrieval showed past `SPECULATE_AFTER_SHARE` of its probe list, this one
    included. The first of them (after reorder its first clusters hold most of its final top-k:
    HedraRAG, RAGCache), or a later one that changed at most `max_drift` since the one before
    (an unsettled partial result is usually rolled back, wasting engine time)."""
    return views == 1 or (views > 1 and drift <= max_drift)


def topk_drift(previous: Sequence[int], current: Sequence[int]) -> float:
    """Drift between two partial top-k id lists: 1 − Jaccard overlap (0 when unchanged)."""
    a, b = set(previous), set(current)
    if not a and not b:
        return 0.0
    return 1.0 - len(a & b) / len(a | b)
