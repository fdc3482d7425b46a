"""Adaptation under load (`serve --adapt`): while what a new request should expect (the recent
p95 plus its wait in the queue) is past the SLO, new requests go to the next cheaper point of a
tuned front, and back when the load falls
(METIS-style, decided per request as it arrives).

The front's points are workflows of the catalog, best quality first (the CLI builds them from
`ragraph tune`'s front). `Switching` is the rule, a pure function of the signal; `Adapter`
keeps the signal (the latencies of the requests served at the current point, the queue) and
routes, logs and counts every switch in `/metrics`."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge

from ragraph.errors import ConfigError
from ragraph.runtime.hub import Ticket
from ragraph.runtime.outcome import Outcome

log = logging.getLogger("ragraph.serve")


@dataclass(frozen=True)
class Switching:
    """When to move. Pressure is what the next request should take over the SLO: the recent p95
    plus its wait for a slot (the requests queued ahead of it, one slot freeing every mean
    latency over the concurrency). Past 1 the next request goes one point cheaper, below `low`
    one point dearer, between them (the hysteresis band) it stays. A point must first have
    served `settle` requests since the last switch (`settle_up` before a move back up): the p95
    then describes it, not the point before (whose slow requests are still finishing when a
    switch down is made). The queue's length alone was a poor signal: a burst of arrivals
    fills it on a server that is not overloaded (docs/benchmarks/adapt.md)."""

    slo_s: float
    concurrency: int  # requests the server runs at once: the queue drains this many at a time
    low: float = 0.6
    window: int = 16  # the recent latencies the p95 is read over
    settle: int = 8
    # Back up only after this many answers at the cheaper point: it drains the queue the
    # dearer point left, so its first answers say little about whether the load fell (with
    # `settle` alone, a 2x phase went down and back up twice: docs/benchmarks/adapt.md).
    settle_up: int = 32

    def __post_init__(self) -> None:
        if not self.slo_s > 0:
            raise ConfigError("--adapt-slo", f"must be positive, got {self.slo_s}")
        if self.concurrency < 1:
            raise ConfigError("concurrency", f"must be at least 1, got {self.concurrency}")
        if not 0 < self.low < 1:
            raise ConfigError("low", f"must be in (0, 1), got {self.low}")
        if not 1 <= self.settle <= self.window:
            raise ConfigError("settle", f"must be in 1..window ({self.window}), got {self.settle}")
        if self.settle_up < self.settle:
            raise ConfigError("settle_up", f"must be at least settle ({self.settle})")

    def pressure(self, recent: Sequence[float], queued: int) -> float:
        """The next request's expected latency over the SLO, from the recent latencies."""
        if not recent:
            return 0.0
        wait = queued * float(np.mean(recent)) / self.concurrency
        return (p95(recent) + wait) / self.slo_s

    def next_level(self, level: int, levels: int, pressure: float, served: int) -> int:
        """The point (0: the best quality) the next request goes to; `served`: requests the
        current point finished since the last switch."""
        if served >= self.settle and pressure > 1 and level + 1 < levels:
            return level + 1
        if served >= self.settle_up and pressure < self.low and level > 0:
            return level - 1
        return level


def p95(latencies: Sequence[float]) -> float:
    """As the bench reports it (`runtime.outcome`: numpy's interpolated percentile)."""
    return float(np.percentile(latencies, 95)) if len(latencies) else float("nan")


@dataclass(frozen=True)
class AdaptPlan:
    """What `serve --adapt` runs: requests for `base` go to one of `levels` (catalog workflow
    names, best quality first)."""

    base: str
    levels: tuple[str, ...]
    switching: Switching


class Adapter:
    """Routes each new request of the adapted workflow to the current point; a HubListener,
    so it hears every request finish."""

    def __init__(self, plan: AdaptPlan, queued: Callable[[], int]) -> None:
        self.plan, self.queued = plan, queued
        self.level = 0
        self.served = 0  # requests the current point finished since the last switch
        self.recent: deque[float] = deque(maxlen=plan.switching.window)
        self.switches: Counter | None = None
        self.routed: Counter | None = None

    def register(self, registry: CollectorRegistry) -> None:
        self.switches = Counter("ragraph_adapt_switches", "serve --adapt: switches of new "
                                "requests to a cheaper (down) or dearer (up) point of the front",
                                ("direction",), registry=registry)
        self.routed = Counter("ragraph_adapt_requests", "serve --adapt: requests routed to "
                              "each point of the front (0: the best quality)", ("point",),
                              registry=registry)
        level = Gauge("ragraph_adapt_level", "serve --adapt: the point new requests go to "
                      "(0: the best quality)", registry=registry)
        level.set_function(lambda: self.level)

    def route(self, workflow: str) -> str:
        """The workflow a new request runs: the current point's, for the adapted one."""
        plan = self.plan
        if workflow != plan.base:
            return workflow
        queued = self.queued()
        pressure = plan.switching.pressure(self.recent, queued)
        level = plan.switching.next_level(self.level, len(plan.levels), pressure, self.served)
        if level != self.level:
            self._switch(level, pressure, queued)
        if self.routed is not None:
            self.routed.labels(str(self.level)).inc()
        return plan.levels[self.level]

    def _switch(self, level: int, pressure: float, queued: int) -> None:
        direction = "down" if level > self.level else "up"
        # A warning: the answers' quality changes, and the server's log should say so by default.
        log.warning("adapt: new %s requests %s from %s to %s (p95 %s, %d queued, SLO %gs, "
                 "pressure %.2f)", self.plan.base, direction, self.plan.levels[self.level],
                 self.plan.levels[level], f"{p95(self.recent):.2f}s", queued,
                 self.plan.switching.slo_s, pressure)
        if self.switches is not None:
            self.switches.labels(direction).inc()
        self.level, self.served = level, 0
        self.recent.clear()

    def submitted(self, ticket: Ticket) -> None:
        pass

    def event(self, ticket: Ticket, event: object) -> None:
        pass

    def finished(self, ticket: Ticket, outcome: Outcome) -> None:
        if ticket.workflow != self.plan.levels[self.level] or ticket.status != "ok":
            return
        self.recent.append(outcome.finished_at - ticket.submitted)
        self.served += 1
