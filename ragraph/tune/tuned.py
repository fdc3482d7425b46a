"""The tuned configuration: a TOML file in the schema `--config` reads
(`runtime.config_file`: `[llm]`, `[search]`, `[scheduler]`), and, where the recommended top-k,
loop bound or generation lengths differ from the workflow's own, the workflow with them set (those are the
workflow's, not the runtime's, knobs) written as `.rag` beside it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragraph.ir.graph import RAGraph
from ragraph.runtime.config import PARTS, RuntimeConfig, tree_with
from ragraph.tune.measure import run_settings
from ragraph.tune.space import Point, with_quality


def tuned_knobs(point: Point, executor: str) -> dict[str, Any]:
    """The runtime knobs a point sets, by their knobs' names: those its measurement ran with."""
    return {"nprobe": point.nprobe, "executor": executor, "passes": point.passes,
            "concurrency": point.concurrency, **dict(run_settings(point))}


def tuned_tree(base: Mapping[str, Any], flat: Mapping[str, Any]) -> dict[str, Any]:
    """`base` (a config file's tree) with the `flat` knobs set, each in its table; checked by
    building the `RuntimeConfig` it describes."""
    tree = tree_with(base, flat)
    RuntimeConfig.of(tree)
    return tree


def to_toml(tree: Mapping[str, Any], header: str) -> str:
    lines = [f"# {line}" for line in header.splitlines()]
    lines += [f"{k} = {_value(v)}" for k, v in tree.items() if k not in PARTS]
    for part in PARTS:
        if tree.get(part):
            lines += ["", f"[{part}]"] + [f"{k} = {_value(v)}" for k, v in tree[part].items()]
    return "\n".join(lines) + "\n"


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Path):
        value = str(value)
    # JSON's strings, numbers and lists of them are TOML's too.
    return json.dumps(value)


@dataclass(frozen=True)
class Written:
    config: Path
    workflow: Path  # the workflow to run with it: the tuned one, or the original


def write_tuned(out: Path, tree: Mapping[str, Any], point: Point, graph: RAGraph,
                workflow: Path) -> Written:
    """The config file at `out`, and the tuned workflow beside it when its knobs moved."""
    tuned = with_quality(graph, point)
    if tuned != graph:
        from ragraph.dsl.printer import to_rag

        workflow = out.with_suffix(".rag")
        workflow.write_text(to_rag(tuned), encoding="utf-8")
    header = (f"ragraph tune: {point.key}\n"
              f"run it: ragraph run {workflow} --config {out} --input QUESTIONS.jsonl")
    out.write_text(to_toml(tree, header), encoding="utf-8")
    return Written(out, workflow)
