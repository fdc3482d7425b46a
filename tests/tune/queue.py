"""A server on virtual time for `serve --adapt`'s rule: `concurrency` slots, a FIFO queue,
open-loop Poisson arrivals phase by phase, and one service time per point of the front
(log-normal about its mean). Every arrival is routed by the Adapter, every answer reported to
it, as the hub does; nothing sleeps."""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace

from ragraph.runtime.outcome import percentile
from ragraph.serve.adapt import Adapter


@dataclass
class Served:
    """Per phase, the latencies of the requests it sent; per request, the point it ran at."""

    latencies: list[list[float]]
    points: list[int] = field(default_factory=list)
    moves: list[tuple[float, int]] = field(default_factory=list)  # (when, the new point)

    def p95(self, phase: int) -> float:
        return percentile(self.latencies[phase], 95, math.nan)


@dataclass
class Queue:
    """`means_s`: each point's mean service time (best first); `rates`: the arrivals (req/s)
    of each phase, `phase_s` long."""

    means_s: Sequence[float]
    rates: Sequence[float]
    phase_s: float = 30.0
    concurrency: int = 8
    sigma: float = 0.45
    seed: int = 0
    now: float = 0.0
    in_system: int = 0

    def arrivals(self, rng: random.Random) -> list[tuple[float, int]]:
        times, t = [], 0.0
        for phase, rate in enumerate(self.rates):
            end = (phase + 1) * self.phase_s
            while (t := t + rng.expovariate(rate)) < end:
                times.append((t, phase))
            t = end
        return times

    def serve(self, make: Callable[[Callable[[], int], Callable[[], float]], Adapter | None],
              levels: Sequence[str]) -> Served:
        """Every request through the rule `make` builds (None: fixed at the best point)."""
        rng = random.Random(self.seed)
        adapter = make(lambda: max(self.in_system - self.concurrency, 0), lambda: self.now)
        arrivals = self.arrivals(rng)
        events = [(t, 0, i) for i, (t, _) in enumerate(arrivals)]  # 0: arrives, 1: finishes
        heapq.heapify(events)
        served = Served([[] for _ in self.rates])
        waiting: list[int] = []
        work: dict[int, tuple[str, float]] = {}
        while events:
            self.now, kind, i = heapq.heappop(events)
            if kind == 0:
                name = levels[0] if adapter is None else adapter.route("w")
                point = levels.index(name)
                if served.points and point != served.points[-1]:
                    served.moves.append((self.now, point))
                served.points.append(point)
                mean = self.means_s[point]
                work[i] = (name, mean * math.exp(rng.gauss(-self.sigma ** 2 / 2, self.sigma)))
                self.in_system += 1
                if self.in_system <= self.concurrency:
                    heapq.heappush(events, (self.now + work[i][1], 1, i))
                else:
                    waiting.append(i)
                continue
            self.in_system -= 1
            submitted, phase = arrivals[i]
            served.latencies[phase].append(self.now - submitted)
            if adapter is not None:
                adapter.finished(SimpleNamespace(workflow=work[i][0], status="ok",
                                                 submitted=submitted),
                                 SimpleNamespace(finished_at=self.now))
            if waiting:
                j = waiting.pop(0)
                heapq.heappush(events, (self.now + work[j][1], 1, j))
        return served
