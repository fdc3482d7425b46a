"""The documentation site builds with `mkdocs build --strict` (a broken link, a missing page, a
page left out of the nav or a docstring mkdocstrings cannot read fails it), and the CLI reference
it generates covers every command."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from ragraph.cli.main import COMMANDS

ROOT = Path(__file__).resolve().parents[2]


def test_site_builds_strictly(tmp_path: Path) -> None:
    assert importlib.util.find_spec("mkdocs") is not None, \
        "the docs extra is not installed: run `make setup`"
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(site)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    cli = (site / "cli" / "index.html").read_text(encoding="utf-8")
    for command in COMMANDS:
        assert f'id="ragraph-{command}"' in cli, f"the CLI reference has no `ragraph {command}`"
    assert 'id="ragraph-index-build"' in cli  # subcommands of subcommands too
    assert "--corpus CORPUS" in cli
    assert (site / "search" / "search_index.json").is_file()  # Material's search is on
