"""svg and png through the Graphviz `dot` program, when it is installed (the other formats need
nothing outside Python)."""

from __future__ import annotations

import shutil
import subprocess

from ragraph.errors import RagraphError

TIMEOUT_S = 60


def dot_program() -> str:
    found = shutil.which("dot")
    if found is None:
        raise RagraphError(
            "error: svg and png output need the Graphviz `dot` program, which is not on PATH.\n"
            "  Install it with `apt-get install graphviz` (Debian/Ubuntu), `brew install graphviz` "
            "(macOS) or `conda install graphviz`,\n"
            "  or use `--format html`, which draws the graph with nothing to install."
        )
    return found


def run_dot(source: str, fmt: str) -> bytes:
    """Lay out DOT text with Graphviz into `fmt` ("svg" or "png")."""
    try:
        done = subprocess.run(
            [dot_program(), f"-T{fmt}"], input=source.encode(), capture_output=True,
            timeout=TIMEOUT_S, check=False,
        )
    except subprocess.TimeoutExpired as err:
        raise RagraphError(f"error: Graphviz `dot` took longer than {TIMEOUT_S} s") from err
    if done.returncode != 0:
        raise RagraphError(
            f"error: Graphviz `dot` failed (exit {done.returncode}): {done.stderr.decode().strip()}"
        )
    return done.stdout
