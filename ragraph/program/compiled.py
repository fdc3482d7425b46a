"""`compile()`: the builder's mutable graph in, an immutable compiled workflow out. Only the
compiled form reaches the runtime (STYLE: builder vs compiled artifact)."""

from __future__ import annotations

from dataclasses import dataclass

from ragraph.ir.graph import RAGraph
from ragraph.passes.base import PassContext, Remark
from ragraph.passes.lower import Program, lower
from ragraph.passes.pipeline import AfterEach, PassStat, parse_spec, run_pipeline, spec_text

DEFAULT_PASSES = "-O2"


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


def compile(  # noqa: A001 -- the verb users look for; ragraph.passes.compile, not builtins
    graph: RAGraph,
    passes: str = DEFAULT_PASSES,
    *,
    after_each: AfterEach | None = None,
) -> CompiledWorkflow:
    """Verify `graph`, run the pass pipeline `passes` on a copy (verifying after every pass),
    lower the result and the source to their programs and return the immutable compiled
    workflow. `after_each(stat, graph)` is called after each pass
    (the hook behind --print-after-each; `stat.seconds` is behind --time-passes). Raises
    PassError for a bad spec or a failing pass (naming it and the passes before it) and
    WorkflowError when the input graph itself is invalid."""
    configured = parse_spec(passes)
    graph.verify()
    source = graph.freeze()
    work = graph.copy()
    ctx = PassContext(original=source)
    stats = run_pipeline(work, configured, ctx, after_each)
    optimized = work.freeze()
    program = lower(optimized)
    return CompiledWorkflow(
        graph=optimized, source=source, passes=spec_text(configured), stats=stats,
        remarks=tuple(ctx.remarks), program=program,
        source_program=lower(source) if configured else program,
    )
