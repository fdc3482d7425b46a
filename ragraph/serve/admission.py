"""A bounded admission queue: the scheduler runs `concurrency` requests, up to `max_queue` more
wait for a slot, and any beyond that are turned away at once with 429 and a `Retry-After` (as
SGLang's gateway does) rather than queueing without bound."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ragraph.serve.http_error import HttpError

MAX_RETRY_AFTER_S = 60


@dataclass(frozen=True)
class Admission:
    concurrency: int
    max_queue: int

    @property
    def capacity(self) -> int:
        return self.concurrency + self.max_queue

    def check(self, in_flight: int, mean_latency_s: float | None) -> None:
        """Raise 429 when `in_flight` requests already fill the scheduler and its queue."""
        if in_flight < self.capacity:
            return
        wait = retry_after_s(in_flight, self.concurrency, mean_latency_s)
        raise HttpError(429, f"server busy: {in_flight} requests in flight, the queue holds "
                        f"{self.max_queue} beyond {self.concurrency} running (--max-queue); "
                        f"retry in {wait} s", headers={"Retry-After": str(wait)})


def retry_after_s(in_flight: int, concurrency: int, mean_latency_s: float | None) -> int:
    """Seconds until a slot is likely free: the queue ahead drains `concurrency` requests per
    mean latency (1 s before any request finished), between 1 and 60 s."""
    ahead = max(in_flight - concurrency + 1, 1)
    seconds = (mean_latency_s or 1.0) * ahead / max(concurrency, 1)
    return int(min(max(math.ceil(seconds), 1), MAX_RETRY_AFTER_S))
