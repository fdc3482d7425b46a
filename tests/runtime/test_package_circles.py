"""The runtime's subpackages import one way: the scheduler builds on the executors' shared parts
(`executors/base.py`), so nothing under `executors` may lead back to `scheduler`, directly or
through another module of `ragraph.runtime` (docs/architecture.md). Inside the scheduler, its
modules import one way too, annotation-only imports (`if TYPE_CHECKING:`) included: a request
holds its jobs and each job its request, and still `jobs` never imports `live`."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

RUNTIME = Path(__file__).resolve().parents[2] / "ragraph" / "runtime"


def part_of(module: str) -> str | None:
    """The node a module of `ragraph.runtime` counts under: its subpackage (`scheduler`), or
    a module of the runtime's own level (`app`); None outside the runtime."""
    parts = module.split(".")
    if parts[:2] != ["ragraph", "runtime"] or len(parts) < 3:
        return None
    return parts[2]


def imported(path: Path, top: Path) -> set[str]:
    """Every module `path` (a file under the folder `top` holding `ragraph`) imports, at any
    depth of the file (a function's own import counts: it is an edge all the same), relative
    imports resolved."""
    package = ".".join(path.relative_to(top).with_suffix("").parts[:-1])
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            out.add(base)
            out.update(f"{base}.{alias.name}" for alias in node.names)
    return out


def runtime_graph(root: Path = RUNTIME) -> nx.DiGraph:
    graph = nx.DiGraph()
    for path in root.rglob("*.py"):
        source = part_of(".".join(path.relative_to(root.parents[1]).with_suffix("").parts))
        if source is None or source == "__init__":
            continue
        for module in imported(path, root.parents[1]):
            target = part_of(module)
            if target is not None and target not in (source, "__init__"):
                graph.add_edge(source, target)
    return graph


def circle(graph: nx.DiGraph, a: str, b: str) -> list[str] | None:
    """A path from `a` to `b` and back, when there is one."""
    try:
        there, back = nx.shortest_path(graph, a, b), nx.shortest_path(graph, b, a)
    except (nx.NetworkXNoPath, nx.NodeNotFound):
        return None
    return there + back[1:]


def test_scheduler_and_executors_are_no_package_circle():
    graph = runtime_graph()
    assert graph.has_edge("scheduler", "executors")  # the scan sees the edge that is meant
    found = circle(graph, "executors", "scheduler")
    assert found is None, "runtime package circle: " + " -> ".join(found)


def test_the_scan_finds_a_circle_through_a_module_and_a_function_import(tmp_path):
    root = tmp_path / "ragraph" / "runtime"
    for name, text in {
        "scheduler/run.py": "from ragraph.runtime.executors.base import Services\n",
        "executors/base.py": "def f():\n    from ..app import make\n",
        "app.py": "from ragraph.runtime.scheduler import run\n",
    }.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    assert circle(runtime_graph(root), "executors", "scheduler") == [
        "executors", "app", "scheduler", "executors"]


SCHEDULER = RUNTIME / "scheduler"


def module_graph(package: Path = SCHEDULER) -> nx.DiGraph:
    """The imports between the modules of one package (by module name), at any depth of a
    file, `if TYPE_CHECKING:` blocks included."""
    top = package.parents[2]
    name = ".".join(package.relative_to(top).parts)
    graph = nx.DiGraph()
    for path in package.glob("*.py"):
        source = f"{name}.{path.stem}"
        graph.add_node(source)
        for module in imported(path, top):
            if module.startswith(f"{name}.") and module.count(".") == name.count(".") + 1:
                graph.add_edge(source, module)
    return graph


def test_the_schedulers_modules_are_no_import_circle():
    graph = module_graph()
    assert graph.has_edge("ragraph.runtime.scheduler.live", "ragraph.runtime.scheduler.jobs")
    circles = list(nx.simple_cycles(graph))
    assert circles == [], "scheduler import circles: " + "; ".join(
        " -> ".join([*c, c[0]]) for c in circles)


def test_the_module_scan_sees_an_annotation_only_import(tmp_path):
    package = tmp_path / "ragraph" / "runtime" / "scheduler"
    package.mkdir(parents=True)
    (package / "jobs.py").write_text("from typing import TYPE_CHECKING\n"
                                     "if TYPE_CHECKING:\n"
                                     "    from ragraph.runtime.scheduler.live import Live\n")
    (package / "live.py").write_text("from ragraph.runtime.scheduler import jobs\n")
    assert list(nx.simple_cycles(module_graph(package))) in (
        [["ragraph.runtime.scheduler.jobs", "ragraph.runtime.scheduler.live"]],
        [["ragraph.runtime.scheduler.live", "ragraph.runtime.scheduler.jobs"]])
