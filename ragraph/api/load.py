"""`ragraph.load`: a workflow ready to run, from a `.rag` file or a builder graph."""

from __future__ import annotations

import os
from pathlib import Path

from ragraph.errors import ConfigError
from ragraph.ir.graph import RAGraph
from ragraph.passes.compiled import DEFAULT_PASSES, CompiledWorkflow

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
