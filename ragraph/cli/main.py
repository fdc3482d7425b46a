"""Entry point of the `ragraph` command.

Each subcommand lives in its own module `ragraph.cli.cmd_<name>` exposing `register(subparsers)`,
which adds its parser and sets `func`. Heavy libraries (torch, faiss, llama.cpp) are imported inside
the command functions so `ragraph check` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from ragraph.console import new_console
from ragraph.errors import RagraphError

# Order is the order of `ragraph --help`.
COMMANDS: tuple[str, ...] = ("run", "serve", "check", "compile", "show", "index", "eval", "bench",
                             "calibrate", "tune")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ragraph",
        description="Compile RAG workflows into fine-grained graphs and run them fast.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"ragraph.cli.cmd_{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except RagraphError as err:
        new_console(stderr=True, highlight=False, soft_wrap=True).print(str(err), markup=False)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
