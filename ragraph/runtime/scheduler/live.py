"""One request as the wavefront runs it, in one object (nano-vllm's `Sequence`): its status in
the scheduler's queues, its walk through the program, the job (or a map's branches) each of its
chains waits on, its speculative generation instances, when each running unit started, and its
locality history.

The engines' sides keep only queues of jobs, and every job points back at its request, so
nothing is looked up by request id. Retiring a request (`queues.RequestQueues.retire`) closes
it (its streams are aborted) and the sides drop its queued jobs; then the object is gone.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum

from ragraph.ir.values import Value
from ragraph.program.program import GenerationChain, Program, RetrievalChain
from ragraph.program.walk import Walk
from ragraph.runtime import effects
from ragraph.runtime.events import RunHooks
from ragraph.runtime.generate import generated_text
from ragraph.runtime.request import Request, RequestState
from ragraph.runtime.retrieval.ivf.locality import History
from ragraph.runtime.scheduler.fanout import Fan, finish_generations
from ragraph.runtime.scheduler.jobs import GenJob, Job, RetJob


class Status(Enum):
    """Where a request is in the scheduler's queues (`queues.RequestQueues` moves it)."""

    WAITING = "waiting"  # arrived: it waits for a slot under the concurrency limit
    RUNNING = "running"  # admitted: it holds a slot and its units run
    FINISHED = "finished"  # answered, failed or cancelled: out of both queues, reported once


@dataclass(eq=False)
class LiveRequest:
    request: Request
    arrived: float  # when it reached the scheduler (its latency and its wait count from here)
    status: Status = Status.WAITING
    # From admission on: its state (a failed one when it cannot start), and once it starts
    # (`start`) its walk through its workflow's program.
    state: RequestState = field(init=False, repr=False)
    program: Program = field(init=False, repr=False)
    walk: Walk = field(init=False, repr=False)
    # By chain origin: the job (a map's `Fan`) the chain's units wait on, from the chain's first
    # unit until its output is assigned. A generation's adopted speculation is put here.
    jobs: dict[str, Job[LiveRequest] | Fan] = field(default_factory=dict)
    # By the generation's origin.
    speculative: dict[str, GenJob[LiveRequest]] = field(default_factory=dict)
    entered: dict[str, float] = field(default_factory=dict)  # running unit -> when it started
    # A split chain's rendered prompts or queries, by origin, from its first unit to its last.
    rendered: dict[str, object] = field(default_factory=dict)
    history: History = field(default_factory=History)  # its searches, for the cluster order

    def start(self, program: Program) -> None:
        """Walk `program` from its state (what admission made of its request)."""
        self.program, self.walk = program, Walk(program, self.state)

    @property
    def finished(self) -> bool:
        return self.status is Status.FINISHED

    @property
    def rid(self) -> str:
        return self.request.id

    @property
    def name(self) -> str:
        return self.request.name

    @property
    def variables(self) -> dict[str, Value]:
        return self.state.variables

    def generations(self) -> Iterator[GenJob[LiveRequest]]:
        """Every generation instance it holds: speculative, then the real ones (map branches)."""
        yield from self.speculative.values()
        for waiter in self.jobs.values():
            for job in waiter.jobs if isinstance(waiter, Fan) else (waiter,):
                if isinstance(job, GenJob):
                    yield job

    def assign(self, origin: str, hooks: RunHooks) -> None:
        """The chain `origin` finished: assign its output (passages or text), forget its job."""
        chain = self.program.retrievals.get(origin)
        if chain is not None:
            self.commit(chain, hooks)
        else:
            self.finish(self.program.generations[origin], hooks)

    def commit(self, chain: RetrievalChain, hooks: RunHooks) -> None:
        """Assign the chain's passages (its search finished) and forget its job."""
        job = self.jobs.pop(chain.origin)
        passages = job.passages if isinstance(job, RetJob | Fan) else None
        assert passages is not None  # the search-steps unit completed
        if isinstance(job, RetJob):
            hooks.retrieved(self.rid, chain.origin, job.searched)
        effects.apply_retrieval_to(chain.output, self.state.variables, passages)
        self.state.retrievals.extend(effects.retrieved(passages))

    def finish(self, chain: GenerationChain, hooks: RunHooks) -> None:
        """Assign the chain's generated text (its decode ended) and forget its job; raises
        the generation's error, which fails this request."""
        job = self.jobs.pop(chain.origin)
        if isinstance(job, Fan):
            for done in finish_generations(job, self.state, chain):
                hooks.generated(self.rid, chain.origin, done.result, done.prompt)
            return
        assert isinstance(job, GenJob)  # a generation chain's job
        error = job.failure()
        if error is not None:
            raise error
        assert job.result is not None  # the decode unit completed
        text = generated_text(job.result)  # raises the engine's error for this request
        hooks.generated(self.rid, chain.origin, job.result, job.prompt)
        effects.apply_generation_to(chain.output, chain.append, self.state.variables, text,
                                    text.min_prob, chain.items)

    def close(self) -> list[GenJob[LiveRequest]]:
        """Abort every stream it has in the engine; the generation jobs it held (the
        generation side drops them from its queues)."""
        held = list(self.generations())
        for job in held:
            if job.stream is not None:
                job.stream.abort()
        self.jobs.clear()
        self.speculative.clear()
        return held
