"""`compile()`: the builder's mutable graph in, an immutable compiled workflow
(`program.compiled.CompiledWorkflow`) out."""

from __future__ import annotations

from ragraph.ir.graph import RAGraph
from ragraph.passes.base import PassContext
from ragraph.passes.lower import lower
from ragraph.passes.pipeline import AfterEach, parse_spec, run_pipeline, spec_text
from ragraph.program.compiled import CompiledWorkflow

DEFAULT_PASSES = "-O2"


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
