"""The wavefront's one owner of its requests (scheduler/queues.py): waiting ones are admitted in
arrival order under the concurrency limit, a request is cancelled (retired) from either queue,
its status follows it, and no request is lost, admitted twice or reported twice."""

from __future__ import annotations

import random

import pytest

from ragraph.runtime.request import Request, RequestState
from ragraph.runtime.scheduler.live import LiveRequest, Status
from ragraph.runtime.scheduler.queues import RequestQueues


def arrive(queues: RequestQueues, rid: str, at: float = 0.0) -> LiveRequest:
    req = queues.add(Request(rid, f"question {rid}?"), at)
    # What admission would make of it; the queues only hand it back to be reported.
    req.state = RequestState(req.request, graph=None, variables={})  # type: ignore[arg-type]
    return req


def test_waiting_requests_are_admitted_in_arrival_order_up_to_the_limit():
    queues = RequestQueues(concurrency=2)
    a, b, c = (arrive(queues, rid, at) for rid, at in (("a", 1.0), ("b", 2.0), ("c", 3.0)))
    assert [r.status for r in (a, b, c)] == [Status.WAITING] * 3 and b.arrived == 2.0
    assert queues.admit() is a and queues.admit() is b
    assert queues.admit() is None  # two running: c waits for a slot
    assert c.status is Status.WAITING and list(queues.waiting) == [c]
    queues.retire(b)
    assert queues.admit() is c and c.status is Status.RUNNING
    assert queues.running == {"a": a, "c": c} and not queues.waiting


def test_a_request_goes_waiting_running_finished_and_is_reported_once():
    queues = RequestQueues(concurrency=1)
    assert not queues.has_work
    req = arrive(queues, "q")
    assert req.status is Status.WAITING and queues.has_work
    queues.admit()
    assert req.status is Status.RUNNING and queues.running_request("q") is req
    queues.retire(req)
    assert req.status is Status.FINISHED and req.finished
    assert queues.running_request("q") is None and queues.has_work  # not reported yet
    assert queues.take_finished() == [req.state]
    assert queues.take_finished() == [] and not queues.has_work
    with pytest.raises(ValueError, match="'q' retired twice"):
        queues.retire(req)


def test_cancel_of_a_waiting_request_retires_it_without_a_slot():
    queues = RequestQueues(concurrency=1)
    first, second, third = (arrive(queues, rid) for rid in ("first", "second", "third"))
    assert queues.admit() is first
    assert queues.waiting_requests("second") == [second]
    queues.retire(second)
    assert second.status is Status.FINISHED and list(queues.waiting) == [third]
    assert queues.admit() is None  # the slot is still first's
    assert queues.take_finished() == [second.state]


def test_cancel_of_a_running_request_frees_its_slot_for_the_next_waiting_one():
    queues = RequestQueues(concurrency=1)
    first, second = arrive(queues, "first"), arrive(queues, "second")
    queues.admit()
    assert queues.waiting_requests("first") == []  # running, not waiting
    queues.retire(first)
    assert queues.admit() is second and second.status is Status.RUNNING


def test_a_cancel_finds_nothing_once_the_request_finished():
    queues = RequestQueues(concurrency=1)
    req = arrive(queues, "q")
    queues.admit()
    queues.retire(req)
    assert queues.running_request("q") is None and queues.waiting_requests("q") == []


@pytest.mark.parametrize("seed", range(5))
def test_no_request_is_lost_admitted_twice_or_reported_twice(seed):
    """Arrivals, admissions, endings and cancels in any order: every request is in exactly
    one place, runs at most `concurrency` at once, and is reported once."""
    rng, queues = random.Random(seed), RequestQueues(concurrency=3)
    arrived: list[LiveRequest] = []
    admitted: list[str] = []
    reported: list[str] = []
    for step in range(300):
        op = rng.choice(["arrive", "arrive", "admit", "end", "cancel", "report"])
        if op == "arrive":
            arrived.append(arrive(queues, f"r{step}", float(step)))
        elif op == "admit" and (req := queues.admit()) is not None:
            admitted.append(req.rid)
        elif op == "end" and queues.running:
            queues.retire(rng.choice(list(queues.running.values())))
        elif op == "cancel" and arrived:
            rid = rng.choice(arrived).rid
            for req in [*queues.waiting_requests(rid), queues.running_request(rid)]:
                if req is not None:
                    queues.retire(req)
        elif op == "report":
            reported += [state.rid for state in queues.take_finished()]
        assert len(queues.running) <= 3
        assert_each_in_one_place(queues, arrived, reported)
    while (req := queues.admit()) is not None or queues.running:
        if req is not None:
            admitted.append(req.rid)
        for running in list(queues.running.values()):
            queues.retire(running)
    reported += [state.rid for state in queues.take_finished()]
    assert len(admitted) == len(set(admitted))
    assert sorted(reported) == sorted(r.rid for r in arrived)  # each once
    assert not queues.has_work


def assert_each_in_one_place(queues: RequestQueues, arrived: list[LiveRequest],
                             reported: list[str]) -> None:
    for req in arrived:
        places = [req in queues.waiting, queues.running.get(req.rid) is req,
                  req in queues.finished, req.rid in reported]
        assert sum(places) == 1, (req.rid, places)
        where = {0: Status.WAITING, 1: Status.RUNNING}.get(places.index(True), Status.FINISHED)
        assert req.status is where
