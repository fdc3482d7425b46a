"""The scheduler's requests, each in exactly one place (nano-vllm's `Scheduler`, which owns the
`waiting` and `running` queues and moves a `Sequence`'s status between them): waiting for a slot
in arrival order, running (at most `concurrency` of them), or finished and not yet reported.

    add (WAITING) → admit (RUNNING) → retire (FINISHED) → take_finished (reported, forgotten)

A waiting request that is cancelled is retired from the waiting queue. The wavefront reports
what `take_finished` hands it after admission and at the end of its loop's turn, never in the
middle of a walk.
"""

from __future__ import annotations

from collections import deque

from ragraph.runtime.request import Request, RequestState
from ragraph.runtime.scheduler.jobs import GenJob
from ragraph.runtime.scheduler.live import LiveRequest, Status


class RequestQueues:
    def __init__(self, concurrency: int) -> None:
        self.concurrency = concurrency
        self.waiting: deque[LiveRequest] = deque()
        self.running: dict[str, LiveRequest] = {}  # by request id
        self.finished: list[LiveRequest] = []  # ended since the run last took them

    @property
    def has_work(self) -> bool:
        """A request is waiting, running, or finished and not reported yet."""
        return bool(self.waiting or self.running or self.finished)

    def add(self, request: Request, arrived: float) -> LiveRequest:
        """`request` reached the scheduler at `arrived`: it waits behind the earlier ones."""
        req = LiveRequest(request, arrived)
        self.waiting.append(req)
        return req

    def admit(self) -> LiveRequest | None:
        """The longest-waiting request, now running, while a slot is free; else None. The
        caller starts it, or retires it when it cannot start (a bad input)."""
        if not self.waiting or len(self.running) >= self.concurrency:
            return None
        req = self.waiting.popleft()
        req.status = Status.RUNNING
        self.running[req.rid] = req
        return req

    def running_request(self, rid: str) -> LiveRequest | None:
        return self.running.get(rid)

    def waiting_requests(self, rid: str) -> list[LiveRequest]:
        return [req for req in self.waiting if req.rid == rid]

    def retire(self, req: LiveRequest) -> list[GenJob[LiveRequest]]:
        """It ended (answered, failed or cancelled): out of its queue and closed, its slot
        free, to be reported once. The generation jobs it held, for the generation side to
        drop (their streams are aborted)."""
        if req.status is Status.RUNNING:
            del self.running[req.rid]
        elif req.status is Status.WAITING:
            self.waiting.remove(req)  # by identity: a LiveRequest compares as itself
        else:
            raise ValueError(f"request {req.rid!r} retired twice")
        req.status = Status.FINISHED
        self.finished.append(req)
        return req.close()

    def take_finished(self) -> list[RequestState]:
        """The states of the requests that ended since the last call, in the order they
        ended; the queues forget them."""
        finished, self.finished = self.finished, []
        return [req.state for req in finished]
