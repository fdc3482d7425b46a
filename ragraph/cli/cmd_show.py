"""`ragraph show FILE`: draw a workflow as written, or as the compiler passes leave it, offline."""

from __future__ import annotations

import argparse
from pathlib import Path

from ragraph.console import new_console
from ragraph.errors import RagraphError
from ragraph.ir.graph import RAGraph

FORMATS = ("tree", "dot", "mermaid", "html", "svg", "png")
# Formats that make a file even without --output (a page or an image is no use on a terminal).
FILE_FORMATS = ("html", "svg", "png")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "show",
        help="draw a workflow (tree, dot, mermaid, html, svg, png), optionally after the passes",
        description=(
            "Draw a .rag workflow. tree prints to the terminal; dot and mermaid print text; html "
            "writes one self-contained page that opens offline; svg and png need Graphviz's `dot`. "
            "With --passes or -O2 the optimized graph is drawn; --compare draws the original and "
            "the optimized graphs side by side."
        ),
    )
    parser.add_argument("file", type=Path, help="workflow file (.rag)")
    parser.add_argument("--format", "-f", choices=FORMATS, default="tree", help="default: tree")
    parser.add_argument(
        "--output", "-o", type=Path,
        help="write here (html/svg/png default to <name>.<format> in the current directory)",
    )
    level = parser.add_mutually_exclusive_group()
    level.add_argument("--passes", metavar="SPEC",
                       help='pass pipeline, e.g. "split-stages,speculate{retrieval=false}"')
    level.add_argument("-O", dest="level", choices=("0", "2"),
                       help="-O0: no passes; -O2: every pass but prefix-layout (the default "
                       "for --compare)")
    parser.add_argument("--compare", action="store_true",
                        help="draw the original and the optimized graph side by side")
    parser.add_argument("--no-legend", dest="legend", action="store_false",
                        help="leave out the legend")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ragraph.viz import render, scenes_for, tree_view

    graph, original, titles = _graphs(args)
    compare_with = original if args.compare else None
    if args.format == "tree" and args.output is None:
        scenes = scenes_for(graph, compare_with, titles, source=original)
        new_console(highlight=False).print(tree_view(scenes, args.legend))
        return 0
    drawing = render(graph, args.format, compare_with=compare_with, legend=args.legend,
                     titles=titles, source=original)
    output = args.output
    if output is None and args.format in FILE_FORMATS:
        output = Path(f"{args.file.stem}.{args.format}")
    if output is None:
        print(drawing, end="")
        return 0
    _write(output, drawing)
    print(output)
    return 0


def _graphs(args: argparse.Namespace) -> tuple[RAGraph, RAGraph | None, tuple[str, str]]:
    """The graph to draw, the original when passes ran, and the two panel titles."""
    from ragraph.dsl import load

    graph = load(args.file)
    spec = args.passes or (f"-O{args.level}" if args.level else None)
    if spec is None and not args.compare:
        return graph, None, ("original", "optimized")
    # Imported only when asked for: drawing a workflow as written needs no compiler.
    from ragraph.passes import DEFAULT_PASSES, compile

    compiled = compile(graph, spec or DEFAULT_PASSES)
    return compiled.graph, compiled.source, ("original", f"optimized ({compiled.passes})")


def _write(path: Path, drawing: str | bytes) -> None:
    try:
        if isinstance(drawing, bytes):
            path.write_bytes(drawing)
        else:
            path.write_text(drawing, encoding="utf-8")
    except OSError as err:
        raise RagraphError(f"error: cannot write {str(path)!r}: {err.strerror}") from err
