"""Workloads in time: offline (everything at once) and online (Poisson arrivals at a rate).

The schedule is computed up front from a seed, so every executor sees the same requests at the
same offsets; the async iterator only waits until each offset and yields the request (each executor
stamps the moment it receives one as that request's start).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import numpy as np

from ragraph.errors import ConfigError
from ragraph.runtime.request import Request


def poisson_offsets(rate: float, count: int, seed: int) -> np.ndarray:
    """Arrival times in seconds (first at 0) of a Poisson process of `rate` requests per second."""
    if not rate > 0:
        raise ConfigError("--rates", f"request rates must be > 0, got {rate}")
    if count < 0:
        raise ConfigError("count", f"must be >= 0, got {count}")
    if count == 0:
        return np.zeros(0)
    gaps = np.random.default_rng(seed).exponential(1.0 / rate, size=count)
    gaps[0] = 0.0
    return np.cumsum(gaps)


def offsets_for(rate: float | None, count: int, seed: int) -> np.ndarray:
    """`rate` None is the offline workload: every request at time 0."""
    return np.zeros(count) if rate is None else poisson_offsets(rate, count, seed)


async def arrive(requests: Sequence[Request], offsets: Sequence[float]) -> AsyncIterator[Request]:
    """Yield each request at its offset from the first iteration (the event loop's clock)."""
    if len(requests) != len(offsets):
        raise ConfigError("offsets", f"{len(offsets)} offsets for {len(requests)} requests")
    loop = asyncio.get_running_loop()
    start = loop.time()
    for request, offset in zip(requests, offsets, strict=True):
        delay = start + float(offset) - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        yield request
