"""MkDocs hook: the parts of the site that are generated from the code at build time.

A page asks for them with a marker comment on a line of its own:

    <!-- ragraph:cli -->                          every subcommand's `--help`, from the parsers
    <!-- ragraph:show workflows/hyde.rag -O2 -->  `ragraph show ... --format mermaid`, drawn

so the CLI reference and the graph drawings cannot drift from what the command prints.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shlex
from pathlib import Path

from ragraph.cli.main import build_parser, main

MARKER = re.compile(r"^<!-- ragraph:(?P<what>\w+)(?P<args>[^>]*)-->$", re.MULTILINE)
# argparse wraps help to the terminal's width; a fixed width makes the page the same on every
# machine (and as `ragraph ... --help` prints it in an 80-column terminal).
HELP_COLUMNS = "80"


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ANN001 - mkdocs objects
    root = Path(config["config_file_path"]).parent
    return MARKER.sub(lambda m: _expand(m["what"], shlex.split(m["args"]), root), markdown)


def _expand(what: str, args: list[str], root: Path) -> str:
    if what == "cli":
        return cli_reference()
    if what == "show":
        return "```mermaid\n" + _show(args, root) + "\n```"
    raise ValueError(f"unknown ragraph marker {what!r}: use cli or show")


def cli_reference() -> str:
    """A section per command and subcommand, each with its `--help` text."""
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_COLUMNS
    try:
        return "\n\n".join(_sections(build_parser(), "ragraph", level=2))
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


def _sections(parser: argparse.ArgumentParser, name: str, level: int) -> list[str]:
    out = [f"{'#' * level} `{name}`\n\n```text\n{parser.format_help().rstrip()}\n```"]
    for sub_name, sub in _subparsers(parser):
        out.extend(_sections(sub, f"{name} {sub_name}", level + 1))
    return out


def _subparsers(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    # argparse has no public accessor for a parser's subcommands; _SubParsersAction.choices is
    # the mapping `--help` itself lists (aliases point at the same parser, shown once).
    found: list[tuple[str, argparse.ArgumentParser]] = []
    for action in parser._actions:  # noqa: SLF001
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            seen: set[int] = set()
            for sub_name, sub in action.choices.items():
                if id(sub) not in seen:
                    seen.add(id(sub))
                    found.append((sub_name, sub))
    return found


def _show(args: list[str], root: Path) -> str:
    """What `ragraph show FILE ARGS --format mermaid` prints, run from the repository root."""
    out = io.StringIO()
    with contextlib.chdir(root), contextlib.redirect_stdout(out):
        status = main(["show", *args, "--format", "mermaid"])
    if status:
        raise RuntimeError(f"ragraph show {' '.join(args)} failed with status {status}")
    return out.getvalue().rstrip()
