"""`ragraph compile FILE [--passes SPEC | -O0 | -O2] [--print-after-each] [--time-passes] [--json]`:
run the pass pipeline and print the optimized graph's listing and the compile remarks."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from ragraph.errors import WorkflowError
from ragraph.ir.graph import RAGraph


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "compile",
        help="optimize a workflow with the compiler passes and print the result",
        description="Run the pass pipeline on a workflow (.rag, or a ragraph JSON graph) and print "
        "the optimized graph's canonical listing, then the compile remarks. Passes: split-stages, "
        "reorder, speculate, rewire, prefetch, prefix-layout; options like "
        "`speculate{retrieval=false}`.",
    )
    parser.add_argument("file", type=Path, help="workflow file (.rag or .json)")
    level = parser.add_mutually_exclusive_group()
    level.add_argument("--passes", metavar="SPEC", help="comma-separated pass list (default -O2)")
    level.add_argument("-O0", dest="level", action="store_const", const="-O0", help="no passes")
    level.add_argument("-O2", dest="level", action="store_const", const="-O2",
                       help="every pass but prefix-layout, with default options "
                       "(the default)")
    parser.add_argument("--print-after-each", action="store_true",
                        help="print the listing after every pass (to stderr)")
    parser.add_argument("--time-passes", action="store_true",
                        help="print each pass's wall time (to stderr)")
    parser.add_argument("--json", action="store_true", help="print the graph as ragraph JSON")
    parser.set_defaults(func=run)


def load_workflow(path: Path) -> RAGraph:
    """A workflow from a .rag file or a ragraph JSON graph."""
    if not path.is_file():
        raise WorkflowError(f"no workflow file {str(path)!r}")
    if path.suffix == ".json":
        from ragraph.ir.serialize import from_json

        return from_json(path.read_text(encoding="utf-8"))
    from ragraph import dsl

    return dsl.load(path)


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    from ragraph.ir.serialize import to_json
    from ragraph.passes import compile

    out = out or sys.stdout
    err = err or sys.stderr
    spec = args.passes or args.level or "-O2"
    hook = None
    if args.print_after_each:
        def hook(stat, graph):  # noqa: ANN001 -- pipeline.AfterEach
            state = "changed" if stat.changed else "unchanged"
            err.write(f"// after {stat.spec} ({state})\n{graph}\n")
    compiled = compile(load_workflow(args.file), spec, after_each=hook)
    out.write(to_json(compiled.graph) + "\n" if args.json else compiled.listing())
    for remark in compiled.remarks:
        err.write(f"{remark}\n")
    if args.time_passes:
        err.write(timing_table(compiled.stats))
    return 0


def timing_table(stats) -> str:  # noqa: ANN001 -- tuple[PassStat, ...]
    lines = [f"{'pass':<40} {'ms':>9} {'nodes':>11} {'edges':>11}"]
    for s in stats:
        lines.append(f"{s.spec:<40} {s.seconds * 1e3:>9.3f} {s.nodes[0]:>4} -> {s.nodes[1]:<4}"
                     f" {s.edges[0]:>4} -> {s.edges[1]:<4}")
    lines.append(f"{'total':<40} {sum(s.seconds for s in stats) * 1e3:>9.3f}")
    return "\n".join(lines) + "\n"
