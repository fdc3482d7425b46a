"""Where a request is in its program: which units it runs now, and which come next. The one
walker of the control flow: the wavefront, the async interpreter (baselines, LangGraph, the
reference) and the stage-batched baseline all step a request through it.

Outside a rewired region a request runs one unit at a time and follows the control edge
`choose_edge` picks from the unit's successors. Entering a Fork starts a region: each member
starts once its DATA predecessors completed in this traversal, so independent work overlaps;
the Join starts when every DATA predecessor is done, and the request then follows the Join's
control edges. Whether a region runs so is the walker's scheduling choice (`regions`): without
it, a Fork is a plain unit and the members run in control order, the order the program as
written runs in. A pure state machine over the request's variables: the caller reports
completions, the walk answers with the units to start.

The request's `path` stays the one a user reads, in original nodes and in the -O0 order: a
chain's origin is recorded when its first unit is entered, and a region's origins are recorded
in control order when its Join is reached.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Protocol

from ragraph.ir.control import choose_edge
from ragraph.ir.nodes import END
from ragraph.ir.values import Value
from ragraph.program.program import Program, Region


class WalkState(Protocol):
    """What the walk reads and writes of a request (the runtime's RequestState is one): the
    unit it entered last, its loop counts, and the path a user reads."""

    variables: dict[str, Value]
    node: str
    loop_counts: Counter[int]
    path: list[str]


@dataclass
class RegionRun:
    region: Region
    started: set[str] = field(default_factory=set)
    done: set[str] = field(default_factory=set)

    def ready(self) -> list[str]:
        out = [m for m in self.region.members if m not in self.started
               and self.region.data_preds[m] <= self.done]
        join = self.region.join
        if join not in self.started and self.region.data_preds[join] <= self.done:
            out.append(join)
        self.started.update(out)
        return out


@dataclass
class Walk:
    """One request's walk. `regions`: a rewired region's members start as their DATA
    predecessors allow (else in control order, one at a time)."""

    program: Program
    state: WalkState
    regions: bool = True
    region: RegionRun | None = None

    def completed(self, uid: str) -> list[str]:
        """`uid` completed: the units to start now (END when the request is done)."""
        unit = self.program.units[uid]
        if unit.region is not None and self.regions:  # a Fork
            self.region = RegionRun(unit.region, started={uid}, done={uid})
            return self._enter_all(self.region.ready())
        if self.region is not None and uid != self.region.region.join:
            self.region.done.add(uid)
            return self._enter_all(self.region.ready())
        if self.region is not None:  # the join: the region is over
            for member in self.region.region.members:
                self._record(member)
            self.region = None
        edge = choose_edge(unit.successors, uid, self.state.variables, self.state.loop_counts)
        return self._enter_all([edge.dst])

    def _enter_all(self, uids: list[str]) -> list[str]:
        for uid in uids:
            self.state.node = uid
            if self.region is None:
                self._record(uid)
        return uids

    def _record(self, uid: str) -> None:
        unit = self.program.units[uid]
        if uid == END or unit.head:
            self.state.path.append(unit.origin)
