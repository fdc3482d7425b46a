"""The Runtime's private event loop, on a thread of its own: the scheduler lives there, and
callers from any thread (or any other event loop) hand it coroutines."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    def __init__(self, name: str = "ragraph-runtime") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.run_until_complete(self.loop.shutdown_default_executor())
            self.loop.close()

    @property
    def here(self) -> bool:
        """Whether the caller is on the loop's own thread (where waiting on it deadlocks)."""
        return threading.current_thread() is self._thread

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run `coro` on the loop; cancelling the future cancels it."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def stop(self) -> None:
        """End the loop once what is scheduled has run, and wait for the thread."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        if not self.here:
            self._thread.join()
