"""Whether the LLM engine answers, for `/readiness`.

An engine with a health check of its own (the HTTP engines' `alive()`: a GET of the upstream
server's health path) is probed in the background every PROBE_S (DOWN_PROBE_S while it does not
answer), and `/readiness` reads the last answer: a load balancer asks often, and each of its probes must not become a request
upstream. An embedded or simulated engine has nothing to ask: it is healthy while it is open."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from ragraph.runtime.llm.protocol import LLMEngine

log = logging.getLogger("ragraph.serve")

PROBE_S = 2.0  # between two probes while the engine answers: how stale /readiness may be
# While it does not, more often: a balancer should send traffic back soon after it recovers.
DOWN_PROBE_S = 0.5


class EngineHealth:
    def __init__(self, llm: LLMEngine) -> None:
        self.llm = llm
        self.down: str | None = None  # why the engine is not ready; None while it answers
        self._task: asyncio.Task[None] | None = None

    @property
    def probed(self) -> bool:
        return callable(getattr(self.llm, "alive", None))

    def start(self) -> None:
        if self.probed:
            self._task = asyncio.create_task(self._watch(), name="engine health")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def probe(self) -> None:
        """Ask the engine once; log when its state changes (once, not every probe)."""
        error = ""
        try:
            alive = bool(await self.llm.alive())  # type: ignore[attr-defined]
            why = None if alive else f"engine {self.llm.name} does not answer its health check"
        except Exception as err:  # a bug in a health check: the engine is not known to be up
            # `/readiness` answers anyone: the error's text (internals) goes to the log only.
            why, error = f"engine {self.llm.name}: its health check failed", f" ({err!r})"
        if why != self.down:
            if why is None:
                log.info("engine %s answers again", self.llm.name)
            else:
                log.warning("%s%s; /readiness answers 503 until it does", why, error)
        self.down = why

    async def _watch(self) -> None:
        while True:
            await self.probe()
            await asyncio.sleep(PROBE_S if self.down is None else DOWN_PROBE_S)
