"""`ragraph run FILE`: answer one question, or a JSONL file of them, with a compiled workflow."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from ragraph.cli.options import add_runtime_flags, runtime_config
from ragraph.cli.run_input import add_search_flags, search_options
from ragraph.console import new_console
from ragraph.errors import ConfigError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "run", help="answer questions with a workflow (embedded llama.cpp + Wikipedia by default)",
        description="Run a .rag workflow on one question (--question) or a JSONL file of "
        "{id, question, golden_answers?} (--input/--output). Defaults: the embedded Gemma-3-270M "
        "on llama.cpp and the embedded Wikipedia index.",
    )
    p.add_argument("file", type=Path,
                   help="workflow file (.rag), or a shipped workflow by name (hyde)")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--question", "-q", help="one question; prints its answer")
    what.add_argument("--input", "-i", type=Path, help="questions: JSONL or a dataset file")
    p.add_argument("--output", "-o", type=Path,
                   help="answers as JSONL (with --input): each line is written as its request "
                   "finishes, so a killed run keeps what it answered; at the end the file is "
                   "rewritten in input order")
    p.add_argument("--resume", action="store_true",
                   help="keep the answers already in --output and run only the rest (failed "
                   "lines and those a kill cut off run again)")
    p.add_argument("--limit", type=int, help="only the first N questions of --input")
    add_runtime_flags(p)
    add_search_flags(p)
    p.add_argument("--trace", type=Path, help="write a Chrome trace (open in Perfetto)")
    p.add_argument("--verbose", "-v", action="store_true",
                   help="also print passages, the path through the graph and the timeline")
    p.set_defaults(func=run)


def _check_files(args: argparse.Namespace) -> None:
    if args.output is not None and args.input is None:
        raise ConfigError("--output", "needs --input")
    if args.resume and args.output is None:
        raise ConfigError("--resume", "needs --output (the file whose answers it keeps)")
    if args.output is not None and args.output.resolve() == args.input.resolve():
        raise ConfigError("--output", f"{args.output} is the --input file")
    # Checked before any model loads: a folder, or a file in a folder that is not there, would
    # fail only when the first answer is written.
    if args.output is not None and args.output.is_dir():
        raise ConfigError("--output", f"{args.output} is a folder; name the file to write")
    if args.output is not None and not args.output.parent.is_dir():
        raise ConfigError("--output", f"{args.output.parent}: no such folder")


def run(args: argparse.Namespace) -> int:
    from ragraph.dsl import load

    _check_files(args)
    search_options(args)  # a bad --k, --mode or --filter fails before any model loads
    if args.limit is not None and args.limit < 1:
        raise ConfigError("--limit", f"must be positive, got {args.limit}")
    config = runtime_config(args)
    from ragraph.api.load import compile_catalog

    # Compiled once, here: a bad spec fails before any model loads, and the run uses this.
    catalog = compile_catalog(load(args.file), config.scheduler.passes)
    console = new_console(highlight=False, soft_wrap=True)
    err = new_console(stderr=True, highlight=False, soft_wrap=True)
    if args.question is not None:
        from ragraph.cli.run_single import run_question

        return asyncio.run(run_question(catalog, args.question, config, args, console, err))
    from ragraph.cli.run_batch import run_file

    return asyncio.run(run_file(catalog, config, args, console, err))
