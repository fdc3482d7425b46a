"""`ragraph eval PREDICTIONS [--golden FILE]`: EM, F1, substring-EM and recall of a run's output."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ragraph.console import new_console
from ragraph.errors import ConfigError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "eval",
        help="score a predictions file (EM, F1, substring-EM, retrieval recall)",
        description=(
            "Score the JSONL that `ragraph run --output` writes: one line per request with "
            "id, question, answer, and optionally golden_answers, error, passages and workflow."
        ),
    )
    parser.add_argument("predictions", type=Path, help="prediction JSONL file")
    parser.add_argument(
        "--golden",
        type=Path,
        help="dataset file with the golden answers (any format `ragraph` reads: FlashRAG JSONL, "
        "NQ-open, NQ oracle, HotpotQA, MuSiQue); matched by id, then by question",
    )
    parser.add_argument(
        "--k", type=int, default=None, help="recall over the top K passages (default: all)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # Imported here so `ragraph --help` does not load the evaluation modules.
    from ragraph.eval.datasets import load_dataset
    from ragraph.eval.predictions import attach_golden, read_predictions
    from ragraph.eval.report import render_table, summarize

    if args.k is not None and args.k < 1:
        raise ConfigError("--k", f"must be at least 1, got {args.k}")
    predictions = read_predictions(args.predictions)
    if args.golden is not None:
        predictions = attach_golden(predictions, load_dataset(args.golden), str(args.predictions))
    rows = summarize(predictions, args.k)
    console = new_console(highlight=False)
    if args.json:
        print(json.dumps([row.to_json() for row in rows], indent=2))
        return 0
    console.print(render_table(rows, title=f"QA evaluation: {args.predictions.name}"))
    if all(row.scored == 0 for row in rows):
        console.print("no golden answers in the file: pass --golden DATASET to score answers")
    return 0
