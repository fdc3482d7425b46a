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
import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge

from ragraph.errors import ConfigError
from ragraph.runtime.hub import Ticket
from ragraph.runtime.outcome import Outcome, percentile

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
    fills it on a server that is not overloaded (docs/benchmarks/adapt.md).

    A move back up also needs the arrivals to have fallen: the recent rate below `up_share` of
    the rate since the dearer point was left (`forget_s` after that, the dearer point is tried
    again whatever the rate: the machine itself may have got faster). A cheaper point keeps up
    with the load the dearer one could not, so its low latency says nothing about whether the
    dearer one would now: on latency alone, a 2x phase went down and back up to the best point,
    whose queue then pushed it down again (docs/benchmarks/adapt.md)."""

    slo_s: float
    concurrency: int  # requests the server runs at once: the queue drains this many at a time
    low: float = 0.6
    window: int = 16  # the recent latencies the p95 is read over
    settle: int = 8
    # Back up only after this many answers at the cheaper point: it drains the queue the
    # dearer point left, so its first answers say little about whether the load fell (with
    # `settle` alone, a 2x phase went down and back up twice: docs/benchmarks/adapt.md).
    settle_up: int = 32
    rates_over: int = 64  # the recent arrivals the arrival rate is read over
    up_share: float = 0.75
    forget_s: float = 60.0

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
        if not 0 < self.up_share <= 1:
            raise ConfigError("up_share", f"must be in (0, 1], got {self.up_share}")

    def pressure(self, recent: Sequence[float], queued: int) -> float:
        """The next request's expected latency over the SLO, from the recent latencies."""
        if not recent:
            return 0.0
        wait = queued * float(np.mean(recent)) / self.concurrency
        return (p95(recent) + wait) / self.slo_s

    def next_level(self, level: int, levels: int, signal: Signal) -> int:
        """The point (0: the best quality) the next request goes to."""
        if signal.served >= self.settle and signal.pressure > 1 and level + 1 < levels:
            return level + 1
        if signal.served >= self.settle_up and signal.pressure < self.low and level > 0 and (
                signal.since_left_rps is None
                or signal.rate_rps < self.up_share * signal.since_left_rps):
            return level - 1
        return level


@dataclass(frozen=True)
class Signal:
    """What the rule reads when a request arrives."""

    pressure: float
    served: int  # requests the current point finished since the last switch
    rate_rps: float  # the recent arrivals, requests/s
    # The arrivals per second since the next dearer point was last left (None: never, or
    # over `forget_s` ago).
    since_left_rps: float | None = None


def p95(latencies: Sequence[float]) -> float:
    """As every report of ragraph reads it (`runtime.outcome.percentile`)."""
    return percentile(latencies, 95, float("nan"))


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

    def __init__(self, plan: AdaptPlan, queued: Callable[[], int],
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.plan, self.queued, self.clock = plan, queued, clock
        self.level = 0
        self.served = 0  # requests the current point finished since the last switch
        self.recent: deque[float] = deque(maxlen=plan.switching.window)
        self.arrivals: deque[float] = deque(maxlen=plan.switching.rates_over)
        self.arrived = 0
        self.switched_at = -math.inf
        self.left: dict[int, tuple[int, float]] = {}  # point: (arrived, when) as it was left
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
        now = self.clock()
        self.arrivals.append(now)
        self.arrived += 1
        queued = self.queued()
        signal = Signal(plan.switching.pressure(self.recent, queued), self.served,
                        self.rate(), self._since_left(self.level - 1, now))
        level = plan.switching.next_level(self.level, len(plan.levels), signal)
        if level != self.level:
            self._switch(level, signal, queued, now)
        if self.routed is not None:
            self.routed.labels(str(self.level)).inc()
        return plan.levels[self.level]

    def rate(self) -> float:
        """The recent arrivals per second, since the last switch only (inf before two): a
        rate read partly over the load before a move down would make a fall of it."""
        times = [t for t in self.arrivals if t >= self.switched_at]
        span = times[-1] - times[0] if times else 0.0
        return (len(times) - 1) / span if span > 0 else math.inf

    def _since_left(self, level: int, now: float) -> float | None:
        arrived, when = self.left.get(level, (0, -math.inf))
        if now - when >= self.plan.switching.forget_s or now <= when:
            return None
        return (self.arrived - arrived) / (now - when)

    def _switch(self, level: int, signal: Signal, queued: int, now: float) -> None:
        direction = "down" if level > self.level else "up"
        # A warning: the answers' quality changes, and the server's log should say so by default.
        log.warning("adapt: new %s requests %s from %s to %s (p95 %s, %d queued, SLO %gs, "
                    "pressure %.2f, arrivals %.1f/s)", self.plan.base, direction,
                    self.plan.levels[self.level], self.plan.levels[level],
                    f"{p95(self.recent):.2f}s", queued, self.plan.switching.slo_s,
                    signal.pressure, signal.rate_rps)
        if self.switches is not None:
            self.switches.labels(direction).inc()
        if direction == "down":
            self.left[self.level] = (self.arrived, now)
        self.level, self.served, self.switched_at = level, 0, now
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
