"""The compiled workflow: what `passes.compile()` returns and the only form of a workflow that
reaches the runtime (STYLE: builder vs compiled artifact): read-only graphs, their programs, and
what each pass did."""

from __future__ import annotations

from dataclasses import dataclass

from ragraph.ir.graph import RAGraph
from ragraph.program.program import Program


@dataclass(frozen=True)
class Remark:
    """A compile remark: something a user can act on (e.g. a prompt layout that defeats caching)."""

    pass_name: str
    node: str
    message: str

    def __str__(self) -> str:
        return f"remark [{self.pass_name}] {self.node}: {self.message}"


@dataclass(frozen=True)
class PassStat:
    """What one pass did: for --time-passes, --print-after-each and the compiled artifact."""

    name: str
    spec: str
    changed: bool
    seconds: float
    nodes: tuple[int, int]  # before, after
    edges: tuple[int, int]
    remarks: tuple[Remark, ...]


@dataclass(frozen=True)
class CompiledWorkflow:
    """The result of compiling a workflow: read-only graphs, their programs and what each pass
    did.

    `graph`: the optimized graph (frozen). `program`: it lowered, what the ragraph executor runs.
    `source`: the graph as written (frozen), for `--compare` drawings and the -O0 reference;
    `source_program`: it lowered, what the baseline executors run (an application's own loop
    over the workflow as written). `passes`: the canonical spec that ran ("-O0" when none).
    `stats`: one PassStat per pass, in order. `remarks`: every pass's remarks."""

    graph: RAGraph
    source: RAGraph
    passes: str
    stats: tuple[PassStat, ...]
    remarks: tuple[Remark, ...]
    program: Program
    source_program: Program

    @property
    def name(self) -> str:
        return self.graph.name

    def listing(self) -> str:
        return str(self.graph)

    def changed_by(self) -> tuple[str, ...]:
        """Names of the passes that changed the graph."""
        return tuple(s.name for s in self.stats if s.changed)
