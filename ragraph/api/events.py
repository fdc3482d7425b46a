"""What `Runtime.stream` yields while a request runs, and last the answer."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ragraph.api.answer import Answer
from ragraph.ir.values import Value
from ragraph.runtime.events import RunEvent, SpeculationSettled, TextProduced, UnitCompleted

# The run's events a stream asks the scheduler for (usage is always counted).
WATCHED = (UnitCompleted, TextProduced, SpeculationSettled)


@dataclass(frozen=True)
class Token:
    """Text a generation produced: `node` the workflow node, `output` the variable it assigns."""

    node: str
    output: str
    text: str


@dataclass(frozen=True)
class NodeCompleted:
    """A unit of the compiled graph completed: `node` is the workflow node it belongs to
    (`unit` the sub-stage itself, of `kind`), `outputs` the variables it assigned."""

    node: str
    unit: str
    kind: str
    outputs: Mapping[str, Value]
    seconds: float


@dataclass(frozen=True)
class Speculation:
    """A speculative generation of `node` met its commit point: adopted, or rolled back and
    started again (the answer is the same either way)."""

    node: str
    adopted: bool


@dataclass(frozen=True)
class Finished:
    """The last event: the request's answer (its `error` set when it failed)."""

    answer: Answer


Event = Token | NodeCompleted | Speculation | Finished


def public_event(event: RunEvent) -> Event | None:
    if isinstance(event, TextProduced):
        return Token(event.origin, event.output, event.text)
    if isinstance(event, UnitCompleted):
        return NodeCompleted(event.origin, event.unit, event.kind, event.outputs,
                             event.ended - event.started)
    if isinstance(event, SpeculationSettled):
        return Speculation(event.origin, event.adopted)
    return None
