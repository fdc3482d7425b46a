"""The reference walk: the base interpreter (`program.interpret`) with fake engines and every
speculative edge declined, a pass-level oracle for compiled graphs.

`walk(graph, inputs)` runs one request through the program of any graph (-O0 or optimized) with
fake engines (generation output = f(rendered prompt), one to four lines; retrieval =
f(rendered query, topk)) and returns the effects on request variables, in order. What each unit
kind does is the base interpreter's (its docstring lists them); this module only supplies the
engines and records every assignment.

`schedule="control"` follows control edges (the -O0 order). `schedule="eager"` runs each rewired
region in the order its DATA edges allow that differs most from the control order (latest node
first), to check that the DATA edges capture every hazard: per variable, the writes and the
inputs they were computed from must equal the control schedule's (`by_variable`).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ragraph.errors import WorkflowError
from ragraph.ir.graph import RAGraph
from ragraph.ir.nodes import START, Merge
from ragraph.ir.values import GeneratedText, Passage, Passages, Value
from ragraph.passes.lower import lower
from ragraph.program.interpret import Interpreter, run_sync
from ragraph.program.program import GenerationChain, Program, RetrievalChain, Unit


def fake_generate(prompt: str) -> str:
    """One to four lines (so list outputs have several items), a function of the prompt."""
    digest = hashlib.sha256(prompt.encode()).hexdigest()
    lines = 1 + int(digest[-1], 16) % 4
    return "\n".join(f"gen-{digest[i * 10:i * 10 + 10]}" for i in range(lines))


def fake_retrieve(query: str, topk: int) -> Passages:
    digest = hashlib.sha256(query.encode()).hexdigest()
    return Passages(tuple(Passage(int(digest[i * 4:i * 4 + 4], 16), f"t{i}", f"{digest[:8]}-{i}")
                          for i in range(topk)))


@dataclass(frozen=True)
class FakeEngines:
    generate: Callable[[str], str] = fake_generate
    retrieve: Callable[[str, int], Passages] = fake_retrieve


@dataclass(frozen=True)
class Effect:
    """An assignment to a request variable by original node `node`, computed from `input`."""

    node: str
    var: str
    value: Value
    input: str


@dataclass
class _Request:
    """One request's walk state (`interpret.Walked`) and its effects."""

    variables: dict[str, Value]
    node: str = START
    loop_counts: Counter[int] = field(default_factory=Counter)
    path: list[str] = field(default_factory=list)
    rendered: dict[str, Any] = field(default_factory=dict)
    effects: list[Effect] = field(default_factory=list)
    steps: int = 0


class _Reference(Interpreter[_Request, str]):
    """The base interpreter with fake engines; every assignment recorded as an Effect."""

    def __init__(self, program: Program, engines: FakeEngines, eager: bool,
                 max_steps: int) -> None:
        super().__init__(program)
        self.engines, self.eager, self.max_steps = engines, eager, max_steps

    def entered(self, req: _Request, uid: str) -> None:
        req.steps += 1
        if req.steps >= self.max_steps:
            raise WorkflowError(f"request did not reach END within {self.max_steps} steps")

    async def complete(self, chain: GenerationChain, req: _Request, prompt: str,
                       branch: int | None) -> GeneratedText:
        return GeneratedText(self.engines.generate(prompt), 1.0)

    async def search(self, chain: RetrievalChain, req: _Request, query: str,
                     branch: int | None) -> Passages:
        return self.engines.retrieve(query, chain.topk)

    def assign_generation(self, chain: GenerationChain, req: _Request, text: GeneratedText,
                          prompt: object) -> None:
        super().assign_generation(chain, req, text, prompt)
        _record(req, chain.origin, chain.output, str(prompt))

    def assign_items(self, origin: str, output: str, req: _Request, values: list[Value],
                     inputs: object) -> None:
        super().assign_items(origin, output, req, values, inputs)
        _record(req, origin, output, str(inputs))

    def assign_passages(self, chain: RetrievalChain, req: _Request, passages: Passages,
                        query: str) -> None:
        super().assign_passages(chain, req, passages, query)
        _record(req, chain.origin, chain.output, query)

    def merge(self, unit: Unit[Merge], req: _Request) -> None:
        given = repr(req.variables[unit.chain.input])
        super().merge(unit, req)
        _record(req, unit.id, unit.chain.output, given)


def _record(req: _Request, origin: str, var: str, source: str) -> None:
    req.effects.append(Effect(origin, var, req.variables[var], source))


def walk(graph: RAGraph, inputs: Mapping[str, Value], engines: FakeEngines = FakeEngines(), *,
         schedule: str = "control", max_steps: int = 10_000) -> tuple[Effect, ...]:
    """The effects of one request on `graph`, speculation declined."""
    if schedule not in ("control", "eager"):
        raise ValueError(f"schedule must be 'control' or 'eager', got {schedule!r}")
    defaults = {i.name: i.default for i in graph.inputs.values() if i.default is not None}
    req = _Request({**defaults, **inputs})
    run_sync(_Reference(lower(graph), engines, schedule == "eager", max_steps).run(req))
    return tuple(req.effects)


def by_variable(effects: tuple[Effect, ...]) -> dict[str, tuple[Effect, ...]]:
    """Each variable's writes in order: what any correct schedule must reproduce exactly."""
    out: dict[str, list[Effect]] = {}
    for e in effects:
        out.setdefault(e.var, []).append(e)
    return {k: tuple(v) for k, v in out.items()}
