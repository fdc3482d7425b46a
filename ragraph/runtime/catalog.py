"""The workflows of one run, by name, each compiled once: a run may mix workflows (each request
names its own). The wavefront scheduler runs each workflow's compiled program; the baselines run
the program of the workflow as written (`source_program`). Workflows are compiled at the edge
(`api.load.compile_catalog`, the CLI and serve), so the runtime never imports the compiler;
`execute` takes only compiled ones (`Catalog.of`).

A long-lived run (the Python API's `Runtime`) learns its workflows as callers bring them
(`add`; `Catalog({}, "")` starts empty and the first added is the default): executors look a
request's workflow up when they admit it, and an entry is never replaced, so the requests in
flight keep theirs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ragraph.errors import ConfigError
from ragraph.ir.graph import RAGraph
from ragraph.program.compiled import CompiledWorkflow
from ragraph.runtime.request import Request

Workflows = RAGraph | CompiledWorkflow | Mapping[str, RAGraph | CompiledWorkflow]
Compiled = CompiledWorkflow | Mapping[str, CompiledWorkflow]


@dataclass
class Catalog:
    workflows: dict[str, CompiledWorkflow]
    default: str

    @classmethod
    def of(cls, workflows: Compiled) -> Catalog:
        """The catalog of workflows compiled already; a graph is refused (compile it once, where
        the run is set up: `ragraph.compile(graph, passes)` or `compile_catalog`)."""
        if isinstance(workflows, CompiledWorkflow):
            workflows = {workflows.name: workflows}
        if not isinstance(workflows, Mapping):
            raise ConfigError("workflow", f"a compiled workflow is needed, got a "
                              f"{type(workflows).__name__}: compile it first "
                              "(ragraph.compile(graph, passes))")
        if not workflows:
            raise ConfigError("workflows", "at least one workflow is needed")
        for name, w in workflows.items():
            if not isinstance(w, CompiledWorkflow):
                raise ConfigError(f"workflows.{name}", f"a compiled workflow is needed, got a "
                                  f"{type(w).__name__}: compile it first "
                                  "(ragraph.compile(graph, passes))")
        return cls(dict(workflows), next(iter(workflows)))

    def add(self, workflow: CompiledWorkflow) -> str:
        """Add `workflow` under its name (numbered when another holds that name); returns the
        name requests give it (`Request.workflow`). Adding the same workflow again is a no-op."""
        name, n = workflow.name, 1
        while name in self.workflows and self.workflows[name] is not workflow:
            n += 1
            name = f"{workflow.name}#{n}"
        self.workflows[name] = workflow
        self.default = self.default or name
        return name

    @property
    def graphs(self) -> Mapping[str, RAGraph]:
        """The workflows as written (what the baseline executors walk)."""
        return {name: w.source for name, w in self.workflows.items()}

    def graph_for(self, request: Request) -> RAGraph:
        return self.workflow_for(request).source

    def workflow_for(self, request: Request) -> CompiledWorkflow:
        return self.workflows[self.name_of(request)]

    def name_of(self, request: Request) -> str:
        """The name of the workflow `request` runs (the default unless it names one)."""
        name = request.workflow or self.default
        if name not in self.workflows:
            known = ", ".join(sorted(self.workflows))
            raise ConfigError("workflow", f"unknown workflow {name!r} (this run has {known})")
        return name
