"""A map's branches in the wavefront: several concurrent retrieval or generation jobs of one
request, one per item, in the same search cycles and engine batches as every other request's.

The units of a map's chain (embed, probe, search steps, commit; prefill, decode, finish) wait on
a `Fan`, the set of its branch jobs: a unit completes when every branch reached its stage, so
the chain runs as one node whatever its multiplicity (at once for an empty list). The chain's
last unit assigns the list of branch results in item order, as every executor does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ragraph.ir.values import Items, Passages, Value
from ragraph.program.program import GenerationChain, Program
from ragraph.runtime import effects
from ragraph.runtime.generate import generated_text
from ragraph.runtime.outcome import RunStats
from ragraph.runtime.request import RequestState
from ragraph.runtime.scheduler.jobs import GenJob, Job, RetJob, Stage, StageWaiter


@dataclass
class Fan(StageWaiter):
    """The branch jobs of one map chain of one request, waited on as one job."""

    jobs: list[Job]
    awaiting: tuple[str, Stage] | None = None
    reached: set[Stage] = field(default_factory=set)

    def __post_init__(self) -> None:
        for job in self.jobs:
            job.fan = self
        self.reached = self._all()

    def _all(self) -> set[Stage]:
        if not self.jobs:
            return set(Stage)  # an empty list: every stage is reached at once
        return set.intersection(*(job.reached for job in self.jobs))

    def branch_reached(self, stage: Stage) -> str | None:
        """A branch reached `stage`: the waiting unit, once every branch has."""
        self.reached = self._all()
        return self.released()

    @property
    def passages(self) -> Items | None:
        """Every branch's final top-k, in item order (None until all are searched)."""
        found = [job.passages for job in self.jobs if isinstance(job, RetJob)]
        return None if any(p is None for p in found) else Items(tuple(found))


def finish_generations(fan: Fan, state: RequestState, chain: GenerationChain) -> list[GenJob]:
    """Assign a map's generated texts in item order; the jobs it is done with."""
    jobs = [job for job in fan.jobs if isinstance(job, GenJob)]  # a generation map's
    values: list[Value] = []
    for job in jobs:
        error = job.failure()
        if error is not None:
            raise error
        assert job.result is not None  # the decode unit completed
        values.append(effects.generated_value(generated_text(job.result)))
    effects.apply_branches_to(chain.output, state.variables, values)
    return jobs


def speculative_values(program: Program, job: RetJob,
                       variables: dict[str, Value]) -> tuple[dict[str, Value], str] | None:
    """The variables a speculative generation renders from, given `job`'s partial top-k, and the
    unit whose control edge leads to that generation; None while a branch has no partial yet.
    For a map: every branch's partial (or final) top-k, merged as the merge after it would."""
    chain = job.chain
    values = dict(variables)
    if job.fan is None:
        if job.partial_passages is None:
            return None
        values[chain.output] = job.partial_passages
        return values, program.last[chain.origin]
    partials: list[Passages] = []
    for branch in job.fan.jobs:
        best = branch.passages if branch.passages is not None else branch.partial_passages
        if best is None:
            return None
        partials.append(best)
    values[chain.output] = Items(tuple(partials))
    if chain.via is None:
        return values, program.last[chain.origin]
    effects.apply_merge(chain.via, values)
    return values, chain.via.id


def count_shared(counters: RunStats, jobs: list[RetJob | None]) -> None:
    """Account one search cycle: whether it carried branches of a map, and whether two or more
    branches of one map shared it (the searches a plain loop would have made one by one)."""
    maps: dict[int, int] = {}  # branches carried, by map (its Fan's id)
    for job in jobs:
        if job is not None and job.fan is not None and not job.warm_only:
            maps[id(job.fan)] = maps.get(id(job.fan), 0) + 1
    if maps:
        counters.fan_steps += 1
        counters.shared_steps += int(max(maps.values()) > 1)
        counters.branch_searches += sum(maps.values())
