"""One request object in the wavefront: it holds every generation instance of its request (the
real ones, a map's branches, speculative ones), and retiring it aborts their streams and leaves
nothing of it in the generation side's queues."""

from __future__ import annotations

from types import SimpleNamespace

from ragraph.runtime.events import RunHooks
from ragraph.runtime.outcome import RunStats
from ragraph.runtime.request import Request, RequestState
from ragraph.runtime.scheduler.fanout import Fan
from ragraph.runtime.scheduler.generation_side import GenerationSide
from ragraph.runtime.scheduler.jobs import GenJob
from ragraph.runtime.scheduler.live import LiveRequest, Status
from ragraph.runtime.scheduler.queues import RequestQueues


class Stream:
    def __init__(self) -> None:
        self.aborted = False

    def abort(self) -> None:
        self.aborted = True


def live() -> LiveRequest:
    req = LiveRequest(Request("q0", "why?"), arrived=0.0)
    req.state = RequestState(req.request, graph=None, variables={})  # type: ignore[arg-type]
    req.start(program=None)  # type: ignore[arg-type]
    return req


def running(gen: GenerationSide, req: LiveRequest, key: int, speculative: bool = False) -> GenJob:
    """A job the engine is generating (what `_submit` leaves)."""
    job = GenJob(key, req, 0.0, chain=None, stream=Stream(),  # type: ignore[arg-type]
                 speculative=speculative)
    gen.jobs[key] = job
    return job


def test_retiring_aborts_every_stream_and_leaves_nothing_queued():
    gen = GenerationSide(SimpleNamespace(hooks=RunHooks()), 4, 0.6, RunStats(),
                         inbox=None)  # type: ignore[arg-type]
    req, other = live(), live()
    queues = RequestQueues(concurrency=1)
    queues.waiting.append(req)
    assert queues.admit() is req
    queued = gen.start(req, chain=None, prompt="a")  # type: ignore[arg-type]
    theirs = gen.start(other, chain=None, prompt="b")  # type: ignore[arg-type]
    req.jobs["answer"] = running(gen, req, 100)
    req.jobs["each"] = Fan([running(gen, req, 101), running(gen, req, 102)])
    req.jobs["queued"] = queued
    req.speculative["next"] = running(gen, req, 103, speculative=True)
    held = queues.retire(req)
    gen.release(held)
    assert sorted(j.key for j in held) == [queued.key, 100, 101, 102, 103]
    assert all(j.stream.aborted for j in held if j.stream is not None)  # type: ignore[attr-defined]
    assert req.finished and not req.jobs and not req.speculative
    assert queues.take_finished() == [req.state] and req.status is Status.FINISHED
    assert gen.jobs == {} and gen.ready == [theirs] and list(gen.waited) == [theirs.key]


def test_a_retrieval_asks_for_partial_results_only_while_its_generation_may_start_on_them():
    from ragraph.runtime.scheduler.jobs import RetJob

    req = live()
    chain = SimpleNamespace(speculate_into="answer")
    job = RetJob(1, req, 0.0, chain=chain)  # type: ignore[arg-type]
    assert job.may_speculate
    req.speculative["answer"] = GenJob(2, req, 0.0, chain=None,  # type: ignore[arg-type]
                                       speculative=True)
    assert not job.may_speculate  # running already: the rest of the search goes whole
    assert not RetJob(3, live(), 0.0, chain=chain, warm_only=True).may_speculate  # type: ignore[arg-type]
    assert not RetJob(4, live(), 0.0,  # type: ignore[arg-type]
                      chain=SimpleNamespace(speculate_into=None)).may_speculate
