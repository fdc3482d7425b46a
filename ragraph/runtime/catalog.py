"""The workflows of one run, by name: a run may mix workflows (each request names its own)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ragraph.errors import ConfigError
from ragraph.ir.graph import RAGraph
from ragraph.runtime.request import Request
from ragraph.runtime.scheduler.plan import ExecutionPlan


@dataclass(frozen=True)
class Catalog:
    """Source graphs (what every executor walks) and, for the wavefront scheduler, their plans."""

    graphs: Mapping[str, RAGraph]
    default: str
    plans: Mapping[str, ExecutionPlan] = field(default_factory=dict)

    @classmethod
    def of(cls, workflows: RAGraph | Mapping[str, RAGraph]) -> Catalog:
        if isinstance(workflows, RAGraph):
            return cls({workflows.name: workflows}, workflows.name)
        if not workflows:
            raise ConfigError("workflows", "at least one workflow is needed")
        return cls(dict(workflows), next(iter(workflows)))

    def graph_for(self, request: Request) -> RAGraph:
        name = request.workflow or self.default
        if name not in self.graphs:
            known = ", ".join(sorted(self.graphs))
            raise ConfigError("workflow", f"unknown workflow {name!r} (this run has {known})")
        return self.graphs[name]

    def plan_for(self, graph: RAGraph) -> ExecutionPlan:
        return self.plans.get(graph.name) or ExecutionPlan.unoptimized(graph)

    def compiled(self, passes: str) -> Catalog:
        """The same catalog with every workflow compiled by `passes` (for the wavefront)."""
        from ragraph.passes import compile as compile_workflow

        plans = {name: ExecutionPlan.from_compiled(compile_workflow(g, passes))
                 for name, g in self.graphs.items()}
        return Catalog(self.graphs, self.default, plans)
