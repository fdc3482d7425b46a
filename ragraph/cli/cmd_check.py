"""`ragraph check FILE...`: parse and verify workflow files, report each one.

Prints `ok FILE (N nodes)` per good file and the located error (file:line:col, the line, a caret)
per bad one; every file is checked even after a failure. Exit status 0 when all are good, else 2.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ragraph.console import new_console
from ragraph.errors import WorkflowError
from ragraph.ir import END, START


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "check",
        help="parse and verify .rag workflow files",
        description="Parse and verify .rag workflow files; errors point at file:line:col.",
    )
    parser.add_argument("files", nargs="+", type=Path, metavar="FILE", help="a .rag workflow")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ragraph.dsl import load  # the parser is built on first use, not for `ragraph --help`

    out = new_console(highlight=False, soft_wrap=True)
    err = new_console(stderr=True, highlight=False, soft_wrap=True)
    failed = 0
    for path in args.files:
        try:
            graph = load(path)
        except WorkflowError as error:
            err.print(str(error), markup=False)
            failed += 1
            continue
        count = sum(1 for node in graph.nodes() if node.id not in (START, END))
        out.print(f"ok {path} ({count} nodes)", markup=False)
    return 2 if failed else 0
