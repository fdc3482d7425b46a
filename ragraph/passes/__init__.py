"""Compiler passes over RAGraph: `compile(graph, "-O2")` returns an immutable CompiledWorkflow
(`ragraph.program.compiled`).

Passes (canonical order): split-stages, reorder, speculate, rewire, prefetch, prefix-layout; `-O2`
runs all but prefix-layout (`O2`). See `pipeline` for the spec syntax and each pass module for
what it adds and what the runtime must do.
"""

from ragraph.ir import stages as _stages  # noqa: F401 -- registers the node kinds passes add
from ragraph.passes.base import Pass, PassContext, PassError
from ragraph.passes.compiled import DEFAULT_PASSES, compile
from ragraph.passes.pipeline import parse_spec, spec_text
from ragraph.passes.registry import CANONICAL_ORDER, O2, PASSES

__all__ = [
    "CANONICAL_ORDER", "DEFAULT_PASSES", "O2", "PASSES", "Pass", "PassContext", "PassError",
    "compile", "parse_spec", "spec_text",
]
