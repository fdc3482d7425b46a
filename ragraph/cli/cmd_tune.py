"""`ragraph tune WORKFLOW --dev QUESTIONS`: the measured Pareto front of answer quality against
speed for a workflow on these engines and this index, the recommended configuration, and a
tuned configuration file (docs/guides/tuning.md)."""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import re
from pathlib import Path
from typing import TYPE_CHECKING

from ragraph.cli.options import add_runtime_flags, given_flags, runtime_config
from ragraph.console import new_console
from ragraph.errors import ConfigError

if TYPE_CHECKING:
    from ragraph.tune.space import Unsearched

QUICK_QUESTIONS = 6  # --quick's dev questions: a few, so the run takes a minute or two


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "tune", help="measure quality against speed over a workflow's knobs; pick a config",
        description="Search nprobe, top-k and loop rounds (which change answers) and the passes, "
        "concurrency, release (on an engine that batches on its own) and, on --engine sim, "
        "the token budget (which change only speed) on dev questions; print the Pareto front, "
        "recommend a configuration and write it as a --config file. --nprobe, --passes, "
        "--concurrency, --release and --sim-budget are searched around, not fixed "
        "(docs/guides/tuning.md).")
    p.add_argument("workflow", type=Path, help="workflow file (.rag)")
    p.add_argument("--dev", type=Path, required=True,
                   help="dev questions with golden answers (JSONL or any dataset `eval` reads)")
    target = p.add_mutually_exclusive_group()
    target.add_argument("--slo", metavar="p95=SECONDS",
                        help="latency target: the recommendation's p95 stays within it (p95=2s)")
    target.add_argument("--min-throughput", type=float, metavar="REQ/S",
                        help="throughput target: the recommendation answers at least this fast")
    p.add_argument("--quick", action="store_true",
                   help=f"a small space (two values a knob) on {QUICK_QUESTIONS} questions")
    p.add_argument("--questions", type=int, metavar="N", help="only the first N dev questions")
    p.add_argument("--results", type=Path, metavar="FILE.jsonl",
                   help="every measured point, one JSON line each; a rerun resumes from it "
                   "(default: WORKFLOW.tune.jsonl in the current directory)")
    p.add_argument("--out", type=Path, metavar="FILE.toml",
                   help="write the recommended configuration as a --config file")
    p.add_argument("--plot", type=Path, metavar="FILE.png",
                   help="the fronts' plot (default: WORKFLOW.tune.png)")
    p.add_argument("--no-plots", action="store_true", help="skip the plot")
    add_runtime_flags(p)
    p.set_defaults(func=run)


def parse_slo(text: str | None) -> float | None:
    """`p95=2s`, `p95=500ms` (or a bare `2`) as seconds."""
    if text is None:
        return None
    found = re.fullmatch(r"\s*(?:p95\s*=\s*)?([0-9]*\.?[0-9]+)\s*(ms|s)?\s*", text)
    if found is None or float(found.group(1)) <= 0:
        raise ConfigError("--slo", f"expected p95=SECONDS such as p95=2s or p95=500ms, got {text!r}")
    value = float(found.group(1))
    return value / 1000 if found.group(2) == "ms" else value


def open_index(config):  # noqa: ANN001, ANN201 - the tests swap in an in-memory index
    from ragraph.runtime.app import open_search

    return open_search(config)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def older_note(older: int, path: Path | None, own: Unsearched) -> str:
    """The note for results lines written before the release was searched: the context digest
    does not pin the release, so only the user can say they ran at this run's."""
    budget = "" if own.budget is None else f" and budget {own.budget}"
    return (f"note: {older} points in {path} were measured before tune searched the release; "
            f"read as run at release {own.release}{budget} (this run's): resume such a file "
            "with the --release it was made with")


def run(args: argparse.Namespace) -> int:
    from ragraph.dsl import load
    from ragraph.eval.datasets import load_dataset
    from ragraph.runtime.request import Request
    from ragraph.tune.front import Constraint
    from ragraph.tune.results import Results, context_of
    from ragraph.tune.space import Unsearched, run_budget, shipped, space_for

    for name in ("workflow", "dev"):
        if not getattr(args, name).is_file():
            raise ConfigError(f"--{name}" if name == "dev" else name,
                              f"{getattr(args, name)}: no such file")
    if args.questions is not None and args.questions < 1:
        raise ConfigError("--questions", f"must be positive, got {args.questions}")
    constraint = Constraint(parse_slo(args.slo), args.min_throughput)
    config = runtime_config(args)
    graph = load(args.workflow)
    limit = args.questions or (QUICK_QUESTIONS if args.quick else None)
    requests = tuple(Request(id=ex.id, question=ex.question, golden_answers=ex.golden_answers)
                     for ex in load_dataset(args.dev, limit=limit))
    space = space_for(graph, args.quick, config.search.nprobe, config.llm)
    stem = args.workflow.stem
    context = context_of({"workflow": _digest(args.workflow), "dev": _digest(args.dev),
                          "questions": len(requests), "llm": config.llm,
                          "index": config.search.index, "executor": config.scheduler.executor})
    own = Unsearched(config.scheduler.release, run_budget(config.llm))
    results = Results.open(args.results or Path(f"{stem}.tune.jsonl"), context, graph.name, own)
    console = new_console(highlight=False, soft_wrap=True)
    if results.older:
        console.print(older_note(results.older, results.path, own), markup=False)
    default = shipped(graph, config.search.nprobe, config.scheduler.passes,
                      config.scheduler.concurrency, *own)
    searched = asyncio.run(_search(graph, requests, config, space, results, default, console))
    return _report(args, config, graph, searched, constraint, console)


async def _search(graph, requests, config, space, results, default,  # noqa: ANN001, ANN202
                  console):
    from ragraph.tune.measure import BenchMeasure
    from ragraph.tune.report import progress_line
    from ragraph.tune.search import search

    console.print(f"tune {graph.name}: {space.size} points in the space, {len(requests)} dev "
                  f"questions, engine {config.llm.engine}")
    measure = BenchMeasure(graph, requests, config, open_index(config))
    if len(results.measured) < space.size:
        await measure.warm_up(space.point(space.quality_settings()[0], space.reference))
    return await search(space, measure, results,
                        lambda step: console.print(progress_line(step), markup=False), default)


def _report(args, config, graph, searched, constraint, console) -> int:  # noqa: ANN001
    from ragraph.tune.front import exactness, front, low_p95, recommend, throughput
    from ragraph.tune.report import (
        default_lines,
        exactness_lines,
        front_table,
        prediction_lines,
        recommendation_lines,
    )

    points = searched.measured
    rec = recommend(points, constraint, searched.default)
    within = [m for m in points if constraint.met(m)] or points
    fronts = front(within, throughput), front(points, low_p95)
    console.print(front_table(f"quality vs throughput ({constraint.describe()})", fronts[0],
                              rec.point))
    console.print(front_table("quality vs p95", fronts[1], rec.point))
    on_front = list({m.point: m for m in (*fronts[0], *fronts[1])}.values())
    for line in prediction_lines(points, on_front, searched.pruned, searched.by_model):
        console.print(line, markup=False)
    for line in [*recommendation_lines(rec), *default_lines(rec)]:
        console.print(line, markup=False)
    compared, mismatches = exactness(points)
    violated = bool(mismatches) and config.llm.batch_invariant
    for line in exactness_lines(compared, mismatches, config.llm.batch_invariant):
        console.print(line, markup=False, style="bold red" if violated else None)
    if not args.no_plots:
        from ragraph.tune.plot import plot_fronts

        path = plot_fronts(points, within, rec.point,
                           args.plot or Path(f"{args.workflow.stem}.tune.png"),
                           f"ragraph tune {graph.name} | engine {config.llm.engine}")
        console.print(f"plot: {path}")
    if args.out is not None and rec.point is not None:
        _write(args, config, graph, rec.point.point, console)
        from ragraph.tune.levels import front_path, write_front

        path = write_front(front_path(args.out), front(points, throughput), graph.name)
        console.print(f"its front, for serve --adapt: {path}", markup=False)
    return 1 if violated else 0


def _write(args, config, graph, point, console) -> None:  # noqa: ANN001
    from ragraph.runtime.config_file import read_config
    from ragraph.tune.tuned import tuned_knobs, tuned_tree, write_tuned

    base = read_config(args.config) if args.config is not None else {}
    flat = {**given_flags(args), **tuned_knobs(point, config.scheduler.executor)}
    written = write_tuned(args.out, tuned_tree(base, flat), point, graph, args.workflow)
    console.print(f"tuned configuration: {written.config} (run it: ragraph run "
                  f"{written.workflow} --config {written.config})", markup=False)
