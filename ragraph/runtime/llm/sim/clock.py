"""Clocks for the simulated engine: real asyncio time, or a virtual clock for tests."""

from __future__ import annotations

import asyncio
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class RealClock:
    """Wall time on the running loop; `sleep` yields the CPU (asyncio.sleep)."""

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class VirtualClock:
    """Time that advances only when the engine sleeps: tests read exact simulated durations
    without waiting for them. Meant for one sleeper (the simulated engine's step loop)."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        self._now += seconds
        await asyncio.sleep(0)
