"""`ragraph run FILE`: answer one question, or a JSONL file of them, with a compiled workflow."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from rich.console import Console

from ragraph.cli import scale_out
from ragraph.cli.options import add_gpu_flags
from ragraph.errors import ConfigError
from ragraph.runtime.config import ENGINES, EXECUTORS, RuntimeConfig


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "run", help="answer questions with a workflow (embedded llama.cpp + Wikipedia by default)",
        description="Run a .rag workflow on one question (--question) or a JSONL file of "
        "{id, question, golden_answers?} (--input/--output). Defaults: the embedded Gemma-3-270M "
        "on llama.cpp and the embedded Wikipedia index.",
    )
    p.add_argument("file", type=Path, help="workflow file (.rag)")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--question", "-q", help="one question; prints its answer")
    what.add_argument("--input", "-i", type=Path, help="questions: JSONL or a dataset file")
    p.add_argument("--output", "-o", type=Path, help="answers as JSONL (with --input)")
    p.add_argument("--limit", type=int, help="only the first N questions of --input")
    p.add_argument("--concurrency", "-c", type=int, default=8, help="requests in flight (8)")
    p.add_argument("--executor", choices=EXECUTORS, default="ragraph",
                   help="ragraph (wavefront, default), sequential or stage-batched baselines")
    level = p.add_mutually_exclusive_group()
    level.add_argument("--passes", metavar="SPEC", help="pass pipeline (default -O2)")
    level.add_argument("-O", dest="level", choices=("0", "2"), help="-O0 none, -O2 all")
    p.add_argument("--engine", choices=ENGINES, default="llamacpp", help="LLM engine")
    p.add_argument("--model", help="GGUF path (llamacpp) / model path (sglang) / name (openai)")
    p.add_argument("--url", help="server URL for --engine openai or sglang")
    p.add_argument("--index", help="index directory (default: the embedded Wikipedia index)")
    p.add_argument("--nprobe", type=int, default=32, help="clusters searched per query (32)")
    p.add_argument("--gen-threads", type=int,
                   help="llama.cpp threads (default: every core for llama.cpp, 1 otherwise)")
    p.add_argument("--search-threads", type=int,
                   help="faiss/embedder threads (default: 1 per 8 cores beside llama.cpp, every "
                   "core beside a GPU engine)")
    add_gpu_flags(p)
    p.add_argument("--trace", type=Path, help="write a Chrome trace (open in Perfetto)")
    p.add_argument("--verbose", "-v", action="store_true",
                   help="also print passages, the path through the graph and the timeline")
    scale_out.add_arguments(p)
    p.set_defaults(func=run)


def config_from(args: argparse.Namespace) -> RuntimeConfig:
    passes = args.passes or (f"-O{args.level}" if args.level else "-O2")
    return RuntimeConfig(
        engine=args.engine, model=args.model, url=args.url, index=args.index,
        executor=args.executor, passes=passes, concurrency=args.concurrency, nprobe=args.nprobe,
        gen_threads=args.gen_threads, search_threads=args.search_threads,
        hot_cache=args.hot_cache, profile=args.profile, **scale_out.fields(args),
    )


def run(args: argparse.Namespace) -> int:
    from ragraph.dsl import load

    if args.output is not None and args.input is None:
        raise ConfigError("--output", "needs --input")
    if args.limit is not None and args.limit < 1:
        raise ConfigError("--limit", f"must be positive, got {args.limit}")
    config = config_from(args)
    from ragraph.runtime.catalog import Catalog

    # Compiled once, here: a bad spec fails before any model loads, and the run uses this.
    catalog = Catalog.compile(load(args.file), config.passes)
    console = Console(highlight=False, soft_wrap=True)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    if args.question is not None:
        from ragraph.cli.run_single import run_question

        return asyncio.run(run_question(catalog, args.question, config, args, console, err))
    from ragraph.cli.run_batch import run_file

    return asyncio.run(run_file(catalog, config, args, console, err))
