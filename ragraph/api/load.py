"""`ragraph.load`: a workflow ready to run, from a `.rag` file or a builder graph; and a run's
catalog of workflows compiled (the edge compiles, so the runtime never imports the compiler)."""

from __future__ import annotations

import os
from pathlib import Path

from ragraph.errors import ConfigError
from ragraph.ir.graph import RAGraph
from ragraph.passes.compiled import DEFAULT_PASSES
from ragraph.program.compiled import CompiledWorkflow
from ragraph.runtime.catalog import Catalog, Workflows

Workflow = str | os.PathLike | RAGraph | CompiledWorkflow


def load(workflow: Workflow, passes: str = DEFAULT_PASSES) -> CompiledWorkflow:
    """Compile `workflow` with the pass pipeline `passes` (default `-O2`, what `ragraph run`
    uses): a `.rag` file (its mistakes are `WorkflowError`s at file:line:col) or a builder
    `RAGraph`; a workflow compiled already is returned as it is."""
    from ragraph.passes import compile as compile_workflow

    if isinstance(workflow, CompiledWorkflow):
        return workflow
    if isinstance(workflow, str | os.PathLike):
        from ragraph.dsl import load as load_rag

        workflow = load_rag(Path(workflow))
    if not isinstance(workflow, RAGraph):
        raise ConfigError("workflow", "must be a .rag file's path, a RAGraph or a compiled "
                          f"workflow, got {type(workflow).__name__}")
    return compile_workflow(workflow, passes)


def compile_catalog(workflows: Workflows, passes: str) -> Catalog:
    """The catalog of a run: every workflow compiled with `passes` (a workflow compiled already
    is taken as is)."""
    from ragraph.passes import compile as compile_workflow

    if isinstance(workflows, RAGraph | CompiledWorkflow):
        workflows = {workflows.name: workflows}
    return Catalog.of({name: w if isinstance(w, CompiledWorkflow) else compile_workflow(w, passes)
                       for name, w in workflows.items()})
