"""The points `serve --adapt` moves between: the quality settings of a tuned front, best
quality first, each as the workflow that runs it. Read from tune's results file or, for a tuned
configuration file, from the front file `tune --out` writes beside it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from ragraph.errors import ConfigError
from ragraph.ir.graph import RAGraph
from ragraph.ir.nodes import Retrieve
from ragraph.tune.front import front, throughput
from ragraph.tune.measure import Measurement
from ragraph.tune.results import measurement_of, read_lines
from ragraph.tune.space import Point, with_quality


def front_path(tuned: Path) -> Path:
    """Where `tune --out tuned.toml` writes its front: tuned.front.jsonl."""
    return tuned.with_suffix(".front.jsonl")


def write_front(path: Path, points: Sequence[Measurement], workflow: str) -> Path:
    """Each point a line, tagged with the workflow it was tuned for (`front_levels` checks it)."""
    path.write_text("".join(json.dumps({"workflow": workflow, **m.to_json()}) + "\n"
                            for m in points), encoding="utf-8")
    return path


def front_levels(path: Path, workflow: str) -> list[Point]:
    """The distinct quality settings of the throughput front of the points in `path` (a
    results or front file, or a tuned .toml beside its front file), best quality first. A
    front tuned for another workflow than `workflow` is refused (files written before points
    named their workflow are taken as they are)."""
    source = front_path(path) if path.suffix == ".toml" else path
    if not source.is_file():
        raise ConfigError("--adapt", f"{source}: no such file (give the results file of "
                          "`ragraph tune`, or the .toml `tune --out` wrote beside its front)")
    points = []
    for number, line in enumerate(read_lines(source, "--adapt"), 1):
        if line.strip():
            raw = _json_line(line, f"{source}:{number}")
            points.append(measurement_of(raw, f"{source}:{number}", "--adapt"))
            _check_workflow(raw, workflow, f"{source}:{number}")
    levels: dict[tuple, Point] = {}
    for m in front(points, throughput):
        levels.setdefault(m.point.quality, m.point)
    if len(levels) < 2:
        raise ConfigError("--adapt", f"{source}: its front has {len(levels)} quality setting(s); "
                          "adapting needs a cheaper point to move to")
    return list(levels.values())


def _json_line(line: str, where: str) -> object:
    try:
        return json.loads(line)
    except (json.JSONDecodeError, RecursionError):
        raise ConfigError("--adapt", f"{where}: not a JSON line (a torn or edited file?); "
                          "tune again to write it whole") from None


def _check_workflow(raw: object, workflow: str, where: str) -> None:
    tuned = raw.get("workflow") if isinstance(raw, dict) else None
    if tuned is not None and tuned != workflow:
        raise ConfigError("--adapt", f"{where}: this front was tuned for workflow {tuned!r}, "
                          f"not {workflow!r} (the first workflow served); tune {workflow!r} "
                          "or serve the workflow it was tuned for first")


def level_graph(graph: RAGraph, point: Point) -> RAGraph:
    """`graph` at `point`'s quality knobs, nprobe set on every retrieval (it is a runtime
    knob in tune, and one server runs every point)."""
    out = with_quality(graph, point)
    for node in list(out.nodes()):
        if isinstance(node, Retrieve):
            out.replace_node(replace(node, nprobe=point.nprobe))
    return out
